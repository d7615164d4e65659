"""The environment of every process Tenure starts for work: an allowlist, never ours whole.

A command executor, an agent CLI, a command check or Tenure's own ``git`` gets
only these variables from the environment Tenure runs in:

- ``BASE_NAMES``: ``PATH``, ``HOME``, ``USER``, ``LOGNAME``, ``SHELL``, ``LANG``,
  ``LANGUAGE``, every ``LC_*``, ``TERM``, ``TZ``, ``TMPDIR`` (``TMP``, ``TEMP``),
  ``PYTHONPATH``, ``PYTHONHOME``, ``PYTHONUNBUFFERED``, ``PYTHONIOENCODING``,
  ``PYTHONUTF8``, ``PYTHONDONTWRITEBYTECODE``, ``VIRTUAL_ENV``, ``SSL_CERT_FILE``,
  ``SSL_CERT_DIR``, and the switches of the model-request guard the test suite
  runs under (``PYTEST_CURRENT_TEST``, ``TENURE_ALLOW_MODEL_REQUESTS``,
  ``TENURE_REFUSE_MODEL_REQUESTS``), so a child stays under it;
- the names the operator adds: ``TENURE_ENV_ALLOW=NAME,NAME,PREFIX*`` (``--pass-env
  NAME`` on ``tenure run``, ``worker``, ``leader`` and ``code`` adds to it);
- the names the caller passes for this executor: an agent CLI preset's provider key
  (``ANTHROPIC_API_KEY`` for claude, ``OPENAI_API_KEY`` for codex...);
- and the values the caller sets explicitly: the task's ``TENURE_TASK_ID``,
  ``TENURE_ATTEMPT``..., an executor's own ``env``.

Never, whatever asks for them: ``TENURE_STORE`` (the store URL and its password) and
any ``TENURE_KEY*`` (members' keys). Model keys reach only the executors that name
them; an LLM executor runs in Tenure's own process and needs none passed.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

from tenure.models.guard import ENV_ALLOW as GUARD_ALLOW
from tenure.models.guard import ENV_ENFORCE as GUARD_ENFORCE
from tenure.protocol.errors import ConfigError
from tenure.protocol.secrets import KEY_PREFIX
from tenure.store.url import ENV_VAR as STORE_VAR

ENV_ALLOW = "TENURE_ENV_ALLOW"
BASE_NAMES: frozenset[str] = frozenset(
    {
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "SHELL",
        "LANG",
        "LANGUAGE",
        "TERM",
        "TZ",
        "TMPDIR",
        "TMP",
        "TEMP",
        "PYTHONPATH",
        "PYTHONHOME",
        "PYTHONUNBUFFERED",
        "PYTHONIOENCODING",
        "PYTHONUTF8",
        "PYTHONDONTWRITEBYTECODE",
        "VIRTUAL_ENV",
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
        "PYTEST_CURRENT_TEST",
        GUARD_ALLOW,
        GUARD_ENFORCE,
    }
)
BASE_PREFIXES: tuple[str, ...] = ("LC_",)
NEVER_NAMES: frozenset[str] = frozenset({STORE_VAR})
NEVER_PREFIXES: tuple[str, ...] = (KEY_PREFIX,)


def never_passed(name: str) -> bool:
    """True for the variables no child process ever gets."""
    return name in NEVER_NAMES or name.startswith(NEVER_PREFIXES)


def operator_allowed(environ: Mapping[str, str] | None = None) -> list[str]:
    """The names (and ``PREFIX*`` patterns) in ``TENURE_ENV_ALLOW``."""
    env = os.environ if environ is None else environ
    return [n.strip() for n in env.get(ENV_ALLOW, "").split(",") if n.strip()]


def _matches(name: str, entries: Iterable[str]) -> bool:
    for entry in entries:
        if entry.endswith("*"):
            if name.startswith(entry[:-1]):
                return True
        elif name == entry:
            return True
    return False


def child_env(
    values: Mapping[str, str] | None = None,
    *,
    pass_names: Iterable[str] = (),
    environ: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The environment for a child process: the allowlisted variables of ``environ``
    (ours by default), those named in ``pass_names`` or ``TENURE_ENV_ALLOW``, then
    ``values`` set on top. Never ``TENURE_STORE`` or a ``TENURE_KEY*``."""
    env = os.environ if environ is None else environ
    extra = [*operator_allowed(env), *pass_names]
    child = {
        name: value
        for name, value in env.items()
        if not never_passed(name)
        and (name in BASE_NAMES or name.startswith(BASE_PREFIXES) or _matches(name, extra))
    }
    for name, value in (values or {}).items():
        if not never_passed(name):
            child[name] = value
    return child


def check_pass_names(names: Iterable[str]) -> list[str]:
    """Validate names an operator asks to pass (``--pass-env``); ConfigError for one
    that may never be passed or is not a variable name."""
    checked: list[str] = []
    for raw in names:
        for name in (n.strip() for n in raw.split(",")):
            if not name:
                continue
            bare = name[:-1] if name.endswith("*") else name
            if not bare or not all(c.isalnum() or c == "_" for c in bare):
                raise ConfigError(f"--pass-env {name!r}: a variable name, or a PREFIX*")
            if never_passed(bare) or any(n.startswith(bare) for n in NEVER_NAMES):
                raise ConfigError(
                    f"--pass-env {name!r}: {STORE_VAR} and {KEY_PREFIX}* are never passed to "
                    "a child process (the store URL and members' keys stay with Tenure)"
                )
            checked.append(name)
    return checked


def allow_names(names: Iterable[str]) -> None:
    """Add names to ``TENURE_ENV_ALLOW`` of this process, so the executors it runs and
    the members it starts pass them on (what ``--pass-env`` does)."""
    checked = check_pass_names(names)
    if not checked:
        return
    present = operator_allowed()
    os.environ[ENV_ALLOW] = ",".join(dict.fromkeys([*present, *checked]))
