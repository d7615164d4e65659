"""Member credentials: who may lead a team and who may work in it, proved by signatures.

A team has two roles. **Leading** (every leader candidate; the operator) signs
what only a leader may say: task envelopes, the tasks it registers and its
acceptance of a result. **Working** is one key per member: a member signs its own
results, so a result verifies only as its assignee's. Signatures are Ed25519
(``cryptography``): a worker's key cannot forge the leader's, and nothing that can
merely write to the store can forge either.

The keys live outside the store, in a directory only their owner can read
(``tenure keys init``), one folder per team path::

    KEYS/acme/research/_lead.key   _lead.pub   (_lead.prev.pub)
    KEYS/acme/research/_members/w1.key   w1.pub

A leader's machine needs ``_lead.key`` and the members' ``.pub`` files; a worker's
needs its own ``_members/ID.key`` and ``_lead.pub``. (Names starting ``_`` can be
no team path's segment, so nested teams' folders never collide with these.)
``_lead.prev.pub`` is the lead key a rotation replaced: a leader re-signs with the
new key what that one signed, and nothing else accepts it. Every folder from the
key directory down is owner-only, tightened whenever keys are made or loaded.
"""

from __future__ import annotations

import base64
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from pydantic import BaseModel

from tenure.protocol import TenureError
from tenure.protocol.envelope import Signature
from tenure.protocol.errors import ConfigError, ProtocolError
from tenure.protocol.ids import check_task_id, check_team
from tenure.protocol.private import DIR_MODE, STATE_DIR_NAME, private_dir, tighten
from tenure.protocol.signing import canonical

__all__ = [
    "ANYONE",
    "ENV_KEYS",
    "LEAD",
    "Credentials",
    "SignatureRefused",
    "TeamKeys",
    "add_member",
    "init_team",
    "key_dir",
    "rotate_lead",
]

LEAD = "lead"  # the signer id of the leading role
PREVIOUS_LEAD = "_lead.prev.pub"  # the lead public key a rotation replaced
ANYONE = "*"  # in ``verify(by=...)``: the leading role or any member with a key
ENV_KEYS = "TENURE_KEYS"  # the key directory, when not given on the command line
Role = Literal["lead", "work"]


class SignatureRefused(TenureError):
    """A body's signature is missing, invalid, or not by the signer it must be."""

    def __init__(self, message: str, *, claimed: str | None = None) -> None:
        super().__init__(message)
        self.claimed = claimed


def key_dir(value: str | Path | None) -> Path | None:
    """The key directory: the given one, else ``$TENURE_KEYS``, else None (unsigned)."""
    chosen = value if value is not None else os.environ.get(ENV_KEYS) or None
    return Path(chosen).expanduser() if chosen is not None else None


@dataclass
class TeamKeys:
    """The public half of a team's keys, read from its folder (re-read for a new member)."""

    root: Path
    team: str
    members: dict[str, Ed25519PublicKey] = field(default_factory=dict, init=False)
    lead_key: Ed25519PublicKey | None = field(default=None, init=False)
    lead_raw: bytes | None = field(default=None, init=False)
    lead_stamp: tuple[int, int, int] | None = field(default=None, init=False)

    @property
    def folder(self) -> Path:
        return self.root.joinpath(*check_team(self.team).split("/"))

    def lead(self) -> Ed25519PublicKey:
        if self.lead_key is None:
            path = self.folder / "_lead.pub"
            self.lead_stamp = _stamp(path)
            self.lead_key = _public(path)
        return self.lead_key

    def lead_changed(self) -> bool:
        """Re-read ``_lead.pub`` if the file changed since it was read (a rotation):
        True if it did. A member keeps working across ``tenure keys rotate``."""
        if self.lead_key is None or _stamp(self.folder / "_lead.pub") == self.lead_stamp:
            return False
        self.lead_key = self.lead_raw = None
        try:
            self.lead()
        except ConfigError:
            return False
        return True

    def previous(self) -> Ed25519PublicKey | None:
        """The lead public key the last rotation replaced, if it was kept."""
        path = self.folder / PREVIOUS_LEAD
        return _public(path) if path.exists() else None

    def lead_bytes(self) -> bytes:
        """The lead public key's raw bytes: what a cache of verified bodies is keyed on."""
        if self.lead_raw is None:
            self.lead_raw = self.lead().public_bytes(
                serialization.Encoding.Raw, serialization.PublicFormat.Raw
            )
        return self.lead_raw

    def member(self, member: str) -> Ed25519PublicKey | None:
        if member not in self.members:
            path = self.folder / "_members" / f"{check_task_id(member, 'member')}.pub"
            if not path.exists():
                return None
            self.members[member] = _public(path)
        return self.members[member]

    def public_for(self, signer: str) -> Ed25519PublicKey | None:
        return self.lead() if signer == LEAD else self.member(signer)


@dataclass
class Credentials:
    """What one member holds: its own private key and the team's public keys.

    ``role`` ``lead``: it signs as ``lead``; ``work``: it signs as ``me``."""

    team: str
    me: str
    role: Role
    private: Ed25519PrivateKey
    keys: TeamKeys

    @classmethod
    def load(cls, root: Path, team: str, me: str, role: Role) -> Credentials:
        """A member's credentials from the key directory; one line naming the file if absent."""
        keys = TeamKeys(root, team)
        if role == LEAD:
            path = keys.folder / "_lead.key"
        else:
            path = keys.folder / "_members" / f"{check_task_id(me, 'member')}.key"
        _tighten(root, path.parent)  # an install from before is tightened too
        if not path.exists():
            hint = (
                f"tenure keys init --team {team}"
                if role == LEAD
                else f"tenure keys add --team {team} --member {me}"
            )
            raise ConfigError(f"no {role} key for {me!r} of team {team!r} at {path}: run `{hint}`")
        return cls(team, me, role, _private(path), keys)

    @property
    def lead_fingerprint(self) -> bytes:
        """Which lead key this member trusts (its raw public bytes)."""
        return self.keys.lead_bytes()

    @property
    def signer(self) -> str:
        return LEAD if self.role == LEAD else self.me

    def for_team(self, team: str, role: Role) -> Credentials:
        """This member's credentials in another team of the same key directory (a
        sub-leader leads its nested team with that team's lead key)."""
        return Credentials.load(self.keys.root, team, self.me, role)

    def sign(self, kind: str, body: BaseModel | dict[str, Any]) -> Signature:
        data = canonical(self.team, kind, body)
        value = base64.b64encode(self.private.sign(data)).decode()
        return Signature(by=self.signer, sig=value)

    def verify(
        self,
        kind: str,
        body: BaseModel | dict[str, Any],
        signature: Signature | None,
        *,
        by: str | Iterable[str],
    ) -> str:
        """The signer, if ``signature`` is a valid signature of ``body`` by one of ``by``;
        ``SignatureRefused`` saying why otherwise."""
        allowed = {by} if isinstance(by, str) else set(by)
        if signature is None:
            raise SignatureRefused(f"the {kind} is not signed", claimed=None)
        if signature.by not in allowed and ANYONE not in allowed:
            raise SignatureRefused(
                f"the {kind} is signed by {signature.by!r}; it must be by "
                f"{' or '.join(sorted(allowed))}",
                claimed=signature.by,
            )
        try:
            public = self.keys.public_for(signature.by)
        except ProtocolError:  # not even a member id ("../x"): no file is looked for
            raise SignatureRefused(
                f"the {kind} is signed by {signature.by!r}, which is no member id",
                claimed=signature.by,
            ) from None
        if public is None:
            raise SignatureRefused(
                f"the {kind} is signed by {signature.by!r}, who has no key in this team",
                claimed=signature.by,
            )
        data = canonical(self.team, kind, body)
        if _valid(public, signature, data):
            return signature.by
        if signature.by == LEAD and self.keys.lead_changed() and _valid(self.keys.lead(), signature, data):
            return signature.by  # signed with the key a rotation just put in place
        raise SignatureRefused(
            f"the {kind}'s signature by {signature.by!r} does not match it",
            claimed=signature.by,
        )

    def by_previous_lead(
        self, kind: str, body: BaseModel | dict[str, Any], signature: Signature | None
    ) -> bool:
        """True if ``signature`` is the lead's by the key the last rotation replaced
        (``_lead.prev.pub``): what a leader re-signs with the current key."""
        if signature is None or signature.by != LEAD:
            return False
        previous = self.keys.previous()
        return previous is not None and _valid(previous, signature, canonical(self.team, kind, body))


def _valid(public: Ed25519PublicKey, signature: Signature, data: bytes) -> bool:
    try:
        public.verify(base64.b64decode(signature.sig, validate=True), data)
    except (InvalidSignature, ValueError):
        return False
    return True


def _stamp(path: Path) -> tuple[int, int, int] | None:
    try:
        info = path.stat()
    except OSError:
        return None
    return (info.st_ino, info.st_mtime_ns, info.st_size)


# --- making keys ---------------------------------------------------------------------------


def init_team(root: Path, team: str, members: Iterable[str] = ()) -> list[Path]:
    """A team's lead key (kept if it exists) and a key per member; returns what was made."""
    folder = TeamKeys(root, team).folder
    _owner_only(root, folder)
    made = []
    if not (folder / "_lead.key").exists():
        made += _write_pair(root, folder, "_lead")
    for member in members:
        made += add_member(root, team, member, replace=False)
    return made


def add_member(root: Path, team: str, member: str, *, replace: bool = True) -> list[Path]:
    """A member's key pair (a new one replaces the old when ``replace``)."""
    folder = TeamKeys(root, team).folder / "_members"
    name = check_task_id(member, "member")
    if (folder / f"{name}.key").exists() and not replace:
        return []
    return _write_pair(root, folder, name)


def rotate_lead(root: Path, team: str, *, keep_previous: bool = True) -> list[Path]:
    """A new lead key pair; leaders need the new ``_lead.key``, members the new ``.pub``.

    ``keep_previous``: the old public key stays as ``_lead.prev.pub``, so the next
    leader re-signs what it signed; without it (the old key was stolen) nothing the
    old key signed is accepted again, and a person reviews those tasks."""
    folder = TeamKeys(root, team).folder
    _owner_only(root, folder)
    current, previous = folder / "_lead.pub", folder / PREVIOUS_LEAD
    if keep_previous and current.exists():
        _write(previous, current.read_bytes(), 0o644)
    elif not keep_previous:
        previous.unlink(missing_ok=True)
    return _write_pair(root, folder, "_lead")


def _write_pair(root: Path, folder: Path, name: str) -> list[Path]:
    _owner_only(root, folder)
    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    key_path, pub_path = folder / f"{name}.key", folder / f"{name}.pub"
    _write(key_path, private, 0o600)
    _write(pub_path, public, 0o644)
    return [key_path, pub_path]


def _write(path: Path, data: bytes, mode: int) -> None:
    """Write atomically with ``mode`` from the start: never a readable half-key."""
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
    os.chmod(tmp, mode)
    tmp.replace(path)


def _owner_only(root: Path, folder: Path) -> None:
    """Every folder from the key directory down to ``folder`` owner-only, made so if
    missing, tightened if not (a ``.tenure`` above the key directory too)."""
    private_dir(root)
    walk = root
    for part in folder.relative_to(root).parts:
        walk = walk / part
        private_dir(walk)


def _tighten(root: Path, folder: Path) -> None:
    """The existing folders from the key directory down to ``folder``, owner-only."""
    walk = root
    tighten(walk, DIR_MODE)
    for part in folder.relative_to(root).parts:
        walk = walk / part
        tighten(walk, DIR_MODE)
    for each in root.parents:
        if each.name == STATE_DIR_NAME:
            tighten(each, DIR_MODE)
            break


def _private(path: Path) -> Ed25519PrivateKey:
    mode = path.stat().st_mode
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise ConfigError(f"{path} can be read by others (mode {mode & 0o777:o}): chmod 600 {path}")
    try:
        key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    except (ValueError, TypeError, OSError) as exc:
        raise ConfigError(f"{path} is not a private key Tenure can read: {exc}") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise ConfigError(f"{path} is not an Ed25519 private key")
    return key


def _public(path: Path) -> Ed25519PublicKey:
    try:
        key = serialization.load_pem_public_key(path.read_bytes())
    except FileNotFoundError:
        raise ConfigError(f"no public key at {path}: copy it from the team's key directory") from None
    except (ValueError, TypeError, OSError) as exc:
        raise ConfigError(f"{path} is not a public key Tenure can read: {exc}") from None
    if not isinstance(key, Ed25519PublicKey):
        raise ConfigError(f"{path} is not an Ed25519 public key")
    return key
