"""Secrets: which values are secret, and taking them out of what Tenure keeps or shows.

A value is a **known secret** when it is

- the value of an environment variable whose name says it holds a credential
  (:func:`is_secret_name`): the name contains ``PASSWORD``, ``PASSWD``, ``PASSPHRASE``
  or ``SECRET`` anywhere, or has a ``_``-separated part ``API_KEY``, ``APIKEY``,
  ``TOKEN``, ``ACCESS_KEY``, ``PRIVATE_KEY`` or ``CREDENTIALS`` (``OPENAI_API_KEY``,
  ``GITHUB_TOKEN``, ``AWS_SECRET_ACCESS_KEY``, ``PGPASSWORD``; not
  ``TOKENIZERS_PARALLELISM``), or it starts with ``TENURE_KEY`` (members' keys);
- the value of a variable the operator lists in ``TENURE_REDACT_ENV`` (``NAME,NAME``);
- the password in any URL held by an environment variable (``TENURE_STORE``,
  ``DATABASE_URL``, a proxy): the ``user:PASSWORD@`` part or a ``?password=`` parameter;
- the password of every store URL this process opened (:func:`register_url`), and
  any value given to :func:`register_secret`.

Values shorter than ``MIN_SECRET_LENGTH`` characters are never treated as secrets:
they would match ordinary text everywhere.

:func:`redact_text` and :func:`redact_value` replace every known secret by ``***``
and also mask the password of any URL written inline (``scheme://user:pw@host``);
:func:`redact_url` shows a URL without its credentials. A secret that is split,
encoded or otherwise transformed is not recognised: redaction is a last line of
defence, not a reason to put secrets where they do not belong.
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from functools import lru_cache
from typing import Any
from urllib.parse import unquote

MASK = "***"
MIN_SECRET_LENGTH = 6
ENV_REDACT = "TENURE_REDACT_ENV"
KEY_PREFIX = "TENURE_KEY"

_SECRET_NAME = re.compile(
    r"PASSWORD|PASSWD|PASSPHRASE|SECRET"
    r"|(?:^|_)(?:API_?KEY|TOKEN|ACCESS_KEY|PRIVATE_KEY|CREDENTIALS?)(?:$|_)",
    re.IGNORECASE,
)
_SECRET_QUERY = re.compile(
    r"^(?:password|passwd|pass|pwd|secret|token|key|auth|sig|signature"
    r"|api_?key|access_?token|access_?key|client_?secret|private_?key|credentials?)$",
    re.IGNORECASE,
)
# scheme://USERINFO@ where USERINFO holds no '/', '?', '#' or whitespace
_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.\-]*://)(?P<info>[^/?#\s]*)@")
_JSON_ESCAPED = re.compile(r'["\\\x00-\x1f\x7f-\x9f\u2028\u2029]')
_QUERY_PARAM = re.compile(r"(?P<lead>[?&;])(?P<name>[^=&#\s]+)=(?P<value>[^&#\s]*)")

_lock = threading.Lock()
_registered: set[str] = set()
_memo: list[Any] = [None, frozenset()]  # (the environment and registrations seen, secrets)
_pinned = threading.local()


def is_secret_name(name: str) -> bool:
    """True when an environment variable of this name holds a credential."""
    upper = name.upper()
    return upper.startswith(KEY_PREFIX) or bool(_SECRET_NAME.search(upper))


def register_secret(value: str | None) -> None:
    """Treat ``value`` as a known secret in this process from now on."""
    if value and len(value) >= MIN_SECRET_LENGTH:
        with _lock:
            _registered.add(value)
            _memo[0] = None
        held: frozenset[str] | None = getattr(_pinned, "secrets", None)
        if held is not None:  # a block that pinned the set sees it too
            _pinned.secrets = held | {value}


def register_url(url: str | None) -> None:
    """Treat the passwords in ``url`` (a store or server URL) as known secrets."""
    for value in url_passwords(url or ""):
        register_secret(value)


def url_passwords(text: str) -> list[str]:
    """Every password written in a URL in ``text``, as written and percent-decoded."""
    found: list[str] = []
    for match in _USERINFO.finditer(text):
        info = match["info"]
        if ":" in info:  # a lone user name is not taken for a secret: "default"...
            found.append(info.split(":", 1)[1])
    if "://" in text:
        for match in _QUERY_PARAM.finditer(text):
            if _SECRET_QUERY.match(match["name"]):
                found.append(match["value"])
    decoded = [unquote(value) for value in found]
    return [v for v in dict.fromkeys([*found, *decoded]) if len(v) >= MIN_SECRET_LENGTH]


def known_secrets(environ: Mapping[str, str] | None = None) -> frozenset[str]:
    """Every known secret now (see the module's docstring); ``environ`` defaults to ours."""
    if environ is None:
        held: frozenset[str] | None = getattr(_pinned, "secrets", None)
        if held is not None:
            return held
    env = os.environ if environ is None else environ
    seen = tuple(env.items())
    with _lock:
        if _memo[0] == seen:
            found: frozenset[str] = _memo[1]
            return found
        registered = set(_registered)
    found = _from_environment(env) | registered
    with _lock:
        _memo[:] = [seen, found]
    return found


@contextmanager
def pinned() -> Iterator[frozenset[str]]:
    """Read the known secrets once and use that set in this thread until the block ends
    (plus any :func:`register_secret` adds meanwhile): a store reads them before it
    takes its write lock, not inside it, and a member once per round or message rather
    than once per write — reading the environment is the costly part of redaction."""
    outer = getattr(_pinned, "secrets", None)
    _pinned.secrets = known_secrets() if outer is None else outer
    try:
        yield _pinned.secrets
    finally:
        _pinned.secrets = outer


def _from_environment(env: Mapping[str, str]) -> frozenset[str]:
    listed = {n.strip().upper() for n in env.get(ENV_REDACT, "").split(",") if n.strip()}
    values: set[str] = set()
    for name, value in env.items():
        if not value:
            continue
        if name.upper() in listed or is_secret_name(name):
            values.add(value)
            values.add(value.strip())
        if "://" in value:
            values.update(url_passwords(value))
    return frozenset(v for v in values if len(v) >= MIN_SECRET_LENGTH)


@lru_cache(maxsize=64)
def _pattern(secrets: frozenset[str]) -> re.Pattern[str] | None:
    if not secrets:
        return None
    ordered = sorted(secrets, key=len, reverse=True)  # a longer secret wins over its prefix
    return re.compile("|".join(re.escape(s) for s in ordered))


def _mask_password(match: re.Match[str]) -> str:
    user, colon, _ = match["info"].partition(":")
    return f"{match['scheme']}{user}:{MASK}@" if colon else match.group(0)


def _mask_userinfo(match: re.Match[str]) -> str:
    """A URL's whole userinfo: a lone one is often a token (``https://TOKEN@host``)."""
    info = match["info"]
    if not info or ":" in info:
        return _mask_password(match)
    return f"{match['scheme']}{MASK}@"


def _mask_query(match: re.Match[str]) -> str:
    if _SECRET_QUERY.match(match["name"]) and match["value"]:
        return f"{match['lead']}{match['name']}={MASK}"
    return match.group(0)


def redact_text(text: str, secrets: Iterable[str] | None = None) -> str:
    """``text`` with every known secret (or those given) replaced by ``***`` and the
    password of every inline URL (``scheme://user:pw@``) masked."""
    if not text:
        return text
    chosen = known_secrets() if secrets is None else frozenset(secrets)
    pattern = _pattern(chosen)
    if pattern is not None:
        text = pattern.sub(MASK, text)
    if "://" in text and "@" in text:
        text = _USERINFO.sub(_mask_password, text)
    return text


def redact_value(value: Any, secrets: Iterable[str] | None = None) -> Any:
    """A JSON-like value (strings, lists, dicts: keys too) with every string redacted."""
    chosen = known_secrets() if secrets is None else frozenset(secrets)
    if _clean(value, chosen):
        return value
    return _walk(value, chosen)


def _clean(value: Any, secrets: frozenset[str]) -> bool:
    """True when ``value`` surely holds nothing to redact, judged on its JSON text in
    one pass instead of a walk (most bodies: no URL, no secret). A secret JSON would
    escape (quotes, backslashes, control characters) is not judged here: walk."""
    if not isinstance(value, dict | list):
        return False
    if any(_JSON_ESCAPED.search(s) for s in secrets):
        return False
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError, RecursionError):
        return False
    if "://" in text:
        return False
    pattern = _pattern(secrets)
    return pattern is None or pattern.search(text) is None


def _walk(value: Any, secrets: frozenset[str]) -> Any:
    if isinstance(value, str):
        return redact_text(value, secrets)
    if isinstance(value, dict):
        return {_walk(k, secrets): _walk(v, secrets) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_walk(v, secrets) for v in value]
    return value


def redact_url(url: str) -> str:
    """The URL as it may be shown: ``redis://:***@host:6379/0``, ``user:***@``, a lone
    userinfo as ``***@``, secret query parameters (``?password=``, ``?token=``...) as
    ``***``, and any other known secret masked, whatever the scheme."""
    if not url:
        return url
    shown = _USERINFO.sub(_mask_userinfo, url)
    if "?" in shown or ";" in shown:
        shown = _QUERY_PARAM.sub(_mask_query, shown)
    return redact_text(shown)
