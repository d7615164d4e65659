"""Coding-agent CLIs as workers: claude, codex, aider, gemini, opencode or any template.

The agent runs with the attempt's worktree as its working directory, stdin from
``/dev/null``, in its own session (so the deadline kills its whole process group),
with its own home/config directory per attempt, and its stdout+stderr streamed to a
log file per attempt. Where bubblewrap works (``sandbox="auto"``, the default, or
``"bwrap"`` to require it) the agent runs in a sandbox that lets it write only its
worktree, that worktree's git metadata and its own home (``executors/sandbox.py``);
``sandbox="off"`` (``tenure code --no-sandbox``) runs it as a plain process.
Placeholders ``{task_file}``, ``{result_file}``, ``{worktree}`` and ``{prompt}`` are
substituted in the template and also exported as
``TENURE_TASK_FILE``, ``TENURE_RESULT_FILE``, ``TENURE_WORKTREE``. Afterwards the
executor ends whatever the agent left running, and commits whatever it left in the
worktree itself — also after a failure or a kill — so no attempt's work is lost:
onto the attempt's branch by name, with the repository's own git directory and a
fresh index (``git.commit_onto``), never trusting the worktree's ``.git`` file,
``HEAD``, index or config.

The agent gets the allowlisted environment (``executors.environment``) and, of the
model keys, only its preset's (``PRESET_KEYS``: ``ANTHROPIC_API_KEY`` for claude,
``OPENAI_API_KEY`` for codex, aider and opencode, ``GEMINI_API_KEY`` for gemini); a
``script:`` agent gets none unless the operator passes it (``--pass-env``). With a model
setting (``--agent-model``, ``agent_model.py``) the preset gets that setting's key in
its key variable instead, and the ambient one not at all (it belongs to another server).
Each preset's command line, home files and model setup are in ``agent_presets.py``;
``extra_args`` (``--agent-arg``) are appended to the command line.

``with_mcp()`` (``tenure code --agent-mcp``) points the agent at its attempt's MCP
server instead of a result file: the preset writes the server into the CLI's own
MCP configuration in the attempt's home, the prompt tells the agent to report through
its tools, and ``run`` is given the server's URL (``TENURE_MCP_URL``; a ``script:``
agent reads that and ``TENURE_MCP_TOKEN`` itself).
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from tenure.executors import git
from tenure.executors.agent_model import ENV_AGENT_MODEL, AgentModel
from tenure.executors.agent_presets import MCP_TOKEN_VAR, PRESETS, Setup
from tenure.executors.containment import UnsafeFile, open_append, read_beneath
from tenure.executors.environment import child_env
from tenure.executors.process_group import (
    ChildProcess,
    describe,
    forget_child,
    kill_group,
    start_child,
)
from tenure.executors.sandbox import SANDBOX_MODES, Layout, SandboxMode, bwrap_problem
from tenure.protocol.errors import ConfigError
from tenure.protocol.private import private_dir

PROMPT = (
    "You are one worker of a coding team. Read your task in {task_file} and do it in "
    "this directory. Change only the paths listed under Scope. Run the acceptance checks "
    "yourself. When done, write your report to {result_file} with the sections: Changed, "
    "Verification (commands you ran and their outcome), Open questions, Blast radius. "
    "Do not commit; do not edit files under .tenure/."
)

PROMPT_MCP = (
    "You are one worker of a coding team. Your task is in {task_file}; the MCP server "
    "'tenure' serves it too: call its read_task tool first. Do the task in this "
    "directory. Change only the paths listed under Scope. Run the acceptance checks "
    "yourself. Check in with report_progress. When done, call submit_result with status "
    "completed (or failed or refused, with the reason in notes.uncertain) and notes "
    '{"changed": [...], "verified": [the commands you ran and their outcome], '
    '"uncertain": [open questions]}; if you cannot go on without an answer, call '
    "ask_question and stop. If the tenure tools are not available, write that report to "
    "{result_file} instead. Do not commit; do not edit files under .tenure/."
)
ENV_MCP_URL = "TENURE_MCP_URL"

PRESET_KEYS: dict[str, tuple[str, ...]] = {name: p.keys for name, p in PRESETS.items()}
"""The provider key each preset is given from the environment, and no other."""
AGENT_PID_FILE = "agent.pid"
AGENT_HELP = "claude, codex, aider, gemini, opencode, or script:CMD with {task_file} {result_file} {worktree}"


@dataclass(frozen=True)
class AgentRun:
    """How one agent attempt ended; ``reason`` is empty when the agent exited 0."""

    exit_code: int | None
    timed_out: bool
    seconds: float
    log: Path
    committed: bool
    reason: str = ""
    sandboxed: bool = False


@dataclass
class AgentCLI:
    """An argv template (placeholders in ``{}``), the CLI's config variable, and the
    environment variables it is given by name (``pass_env``: its provider key)."""

    name: str
    template: list[str]
    config_var: str | None = None
    isolate_home: bool = True
    env: dict[str, str] = field(default_factory=dict, repr=False)  # a model key, maybe
    grace_seconds: float = 2.0
    pass_env: tuple[str, ...] = ()
    # "auto": in bubblewrap where it works, else unsandboxed (and said so); "bwrap":
    # refuse to run without it; "off": never (``tenure code --no-sandbox``)
    sandbox: SandboxMode = "auto"
    # what a preset writes in the attempt's home and the variables naming those files
    setup: Setup = field(default_factory=Setup)
    model: AgentModel | None = None  # the server it is pointed at (--agent-model)
    in_sandbox: dict[str, str] = field(default_factory=dict)  # argv swaps inside bwrap
    mcp: bool = False  # reports over its attempt's MCP server (``with_mcp``)

    @classmethod
    def from_spec(
        cls,
        spec: str,
        *,
        isolate_home: bool = True,
        sandbox: SandboxMode = "auto",
        model: AgentModel | None = None,
        bare: bool = False,
        extra_args: Sequence[str] = (),
    ) -> AgentCLI:
        """A preset or ``script:CMD``; ``model``: the server it is pointed at
        (``--agent-model``); ``bare``: the CLI's small-prompt mode (``--agent-bare``);
        ``extra_args``: appended to its command line (``--agent-arg``)."""
        if spec in PRESETS:
            return cls._preset(spec, isolate_home, sandbox, model, bare, extra_args)
        kind, _, rest = spec.partition(":")
        if kind in ("script", "command") and rest.strip():
            if bare:
                raise ConfigError("--agent-bare is a preset's mode (claude); a script has none")
            try:
                argv = shlex.split(rest)
            except ValueError as exc:
                raise ConfigError(f"--agent {spec!r}: {exc}") from None
            env = {} if model is None else {ENV_AGENT_MODEL: str(model.spec)}
            argv += list(extra_args)
            return cls("script", argv, None, isolate_home, env=env, sandbox=sandbox, model=model)
        raise ConfigError(f"--agent must be one of {AGENT_HELP}; got {spec!r}")

    @classmethod
    def _preset(
        cls,
        name: str,
        isolate_home: bool,
        sandbox: SandboxMode,
        model: AgentModel | None,
        bare: bool,
        extra_args: Sequence[str],
    ) -> AgentCLI:
        if model is not None and not isolate_home:
            raise ConfigError(
                "--agent-model configures the agent in a home of its own per attempt; "
                "it does not go with --share-home (your login): drop one of them"
            )
        preset = PRESETS[name]
        setup = preset.setup(model, bare=bare)
        env = dict(setup.env)
        pass_env = preset.keys
        if model is not None:  # its key, under the CLI's own name; the ambient one stays
            env[preset.key_var(model)] = model.key_or_placeholder()
            pass_env = ()
        template = [*preset.argv, *setup.argv, *extra_args]
        return cls(
            name,
            template,
            preset.config_var,
            isolate_home,
            env=env,
            pass_env=pass_env,
            sandbox=sandbox,
            setup=setup,
            model=model,
            in_sandbox=dict(preset.in_sandbox),
        )

    def with_mcp(self) -> AgentCLI:
        """This agent, pointed at its attempt's MCP server (``--agent-mcp``): the
        preset's MCP configuration added (ConfigError for a CLI without an MCP client)."""
        if self.mcp:
            return self
        if self.name not in PRESETS:  # a script reads TENURE_MCP_URL and the token itself
            return replace(self, mcp=True)
        if not self.isolate_home:
            raise ConfigError(
                "--agent-mcp configures the agent in a home of its own per attempt; it "
                "does not go with --share-home (your login): drop one of them"
            )
        setup = PRESETS[self.name].mcp(self.setup)
        added = list(setup.argv[len(self.setup.argv) :])
        return replace(self, mcp=True, setup=setup, template=[*self.template, *added])

    def sandboxed(self) -> bool:
        """Whether the agent runs in bubblewrap (``ConfigError`` if it must and cannot)."""
        if self.sandbox not in SANDBOX_MODES:
            raise ConfigError(f"sandbox must be one of {', '.join(SANDBOX_MODES)}; got {self.sandbox!r}")
        if self.sandbox == "off":
            return False
        problem = bwrap_problem()
        if problem is not None and self.sandbox == "bwrap":
            raise ConfigError(
                f"the agent must run in a sandbox, but {problem}; install bubblewrap "
                "(apt-get install bubblewrap), or pass --no-sandbox to run it unsandboxed"
            )
        return problem is None

    def sandbox_note(self) -> str:
        """One line for the run's output: how the agent is contained."""
        if self.sandboxed():
            return "agents run in a bubblewrap sandbox (they may write only their worktree and home)"
        why = "--no-sandbox" if self.sandbox == "off" else (bwrap_problem() or "")
        return (
            f"WARNING: agents run UNSANDBOXED ({why}): they can write anywhere you can; "
            "the leader only detects and undoes changes to .git and your checkout"
        )

    def check_installed(self) -> None:
        """Refuse an agent whose program is not on PATH, naming it and how to fix it."""
        program = self.template[0]
        if "{" in program:
            return
        if shutil.which(program) is None and not Path(program).is_file():
            raise ConfigError(
                f"agent CLI {program!r} is not installed (not on PATH); install it, "
                "or pick another with --agent (e.g. script:CMD)"
            )

    def argv(self, values: Mapping[str, str], *, sandboxed: bool = False) -> list[str]:
        """The command line; ``sandboxed``: inside Tenure's bubblewrap, where the
        preset's own sandbox flag is swapped (``in_sandbox``: codex cannot nest one)."""
        swap = self.in_sandbox if sandboxed else {}
        return [swap.get(part, fill(part, values)) for part in self.template]

    def home_vars(self, home: str) -> dict[str, str]:
        """The variables that point the CLI at the attempt's ``home`` (a path, or the
        placeholder ``{home}`` for ``tenure agents``); none with a shared home."""
        if not self.isolate_home:
            return {}
        env = {"XDG_CONFIG_HOME": f"{home}/.config", "XDG_CACHE_HOME": f"{home}/.cache"}
        if self.config_var:
            env[self.config_var] = f"{home}/{self.name}"
        else:
            env["HOME"] = home
        for var, relative in self.setup.home_env.items():
            env[var] = f"{home}/{relative}"
        return env

    def prepare_home(self, home: Path, mcp_url: str | None = None) -> dict[str, str]:
        """Create what the CLI needs in the attempt's ``home`` (its config directory, the
        preset's files, with the attempt's MCP server's URL) and return the variables
        that point it there. Nothing with a shared home: the user's own configuration
        is never written."""
        if not self.isolate_home:
            return {}
        if self.config_var:
            private_dir(home / self.name)
        urls = {"mcp_url": mcp_url} if mcp_url else {}
        for relative, text in self.setup.files.items():
            path = home / relative
            private_dir(path.parent)
            _write_new(path, fill(text, urls))
        return self.home_vars(str(home))

    def run(
        self,
        *,
        worktree: Path,
        task_file: Path,
        result_file: Path,
        attempt_dir: Path,
        deadline_seconds: float,
        extra_env: Mapping[str, str],
        commit_message: str,
        cancel: threading.Event | None = None,
        dirs: git.Dirs | None = None,
        branch: str | None = None,
        protect: Sequence[Path] = (),
        before_commit: Callable[[], object] | None = None,
        on_start: Callable[[ChildProcess], None] | None = None,
        mcp_url: str | None = None,
    ) -> AgentRun:
        """Run the agent once in ``worktree``; ``dirs``: the worktree's git directories
        (its own writable in the sandbox); ``branch``: the attempt's branch, where what
        the agent left is committed whatever its ``HEAD`` says; ``protect``: directories
        put back read-only over a shared home (the repository, its git directory);
        ``before_commit``: called once the agent is gone, before anything is committed
        (the leader's guard undoes what the agent may not change); ``on_start``: told of
        the agent's process (the attempt records it, see ``process_group``);
        ``mcp_url``: the attempt's MCP server, for an agent ``with_mcp`` (its token in
        ``extra_env``)."""
        if self.mcp and not (mcp_url and extra_env.get(MCP_TOKEN_VAR)):
            raise ConfigError("an agent with_mcp runs with its attempt's MCP server and token")
        private_dir(attempt_dir)  # its log and the agent's own home (its login) stay ours
        home = private_dir(attempt_dir / "home")
        log = attempt_dir / "agent.log"
        sandboxed = self.sandboxed()
        values = {
            "task_file": str(task_file),
            "result_file": str(result_file),
            "worktree": str(worktree),
            "home": str(home),
        }
        values["prompt"] = fill(PROMPT_MCP if self.mcp else PROMPT, values)
        argv = self.argv(values, sandboxed=sandboxed)
        given = {
            **self.env,
            **extra_env,
            "TENURE_TASK_FILE": str(task_file),
            "TENURE_RESULT_FILE": str(result_file),
            "TENURE_WORKTREE": str(worktree),
        }
        if self.mcp and mcp_url:
            given[ENV_MCP_URL] = mcp_url
        env = child_env(given, pass_names=self.pass_env)
        env.update(self.prepare_home(home, mcp_url if self.mcp else None))
        if sandboxed:
            (home / "tmp").mkdir(exist_ok=True)
            env["TMPDIR"] = str(home / "tmp")  # /tmp is read-only in the sandbox
            writable = [home, worktree] + ([dirs.git_dir] if dirs is not None else [])
            shared = None if self.isolate_home else Path(os.environ.get("HOME", str(Path.home())))
            layout = Layout(worktree, writable, protect=protect, shared_home=shared)
            command = layout.argv(argv)
        else:
            command = argv
        started = time.monotonic()
        timed_out = False
        with os.fdopen(open_append(log), "ab") as sink:
            sink.write(f"$ {shlex.join(argv)}\n".encode())
            if sandboxed:
                sink.write(f"[tenure] in a sandbox: {shlex.join(command[: -len(argv)])}\n".encode())
            else:
                sink.write(f"[tenure] {self.sandbox_note()}\n".encode())
            sink.flush()
            try:
                proc = start_child(
                    command,
                    cwd=worktree,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=sink,
                    stderr=subprocess.STDOUT,
                )
            except OSError as exc:
                reason = f"cannot start {argv[0]!r}: {exc.strerror}"
                sink.write(f"{reason}\n".encode())
                return AgentRun(None, False, 0.0, log, False, reason)
            pid_file = attempt_dir / AGENT_PID_FILE
            _write_pid(pid_file, proc.pid)  # so a resumed leader can end an orphan
            if on_start is not None:
                on_start(describe(proc))
            code: int | None = None
            cancelled = False
            while code is None:
                left = deadline_seconds - (time.monotonic() - started)
                if left <= 0 or (cancel is not None and cancel.is_set()):
                    timed_out, cancelled = left <= 0, left > 0
                    kill_group(proc, self.grace_seconds)
                    code = proc.returncode
                    why = (
                        "cancelled by the leader"
                        if cancelled
                        else f"deadline of {deadline_seconds:g}s exceeded"
                    )
                    sink.write(f"\n[tenure] {why}; process group killed\n".encode())
                    break
                try:
                    code = proc.wait(timeout=min(left, 0.1 if cancel is not None else left))
                except subprocess.TimeoutExpired:
                    continue
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)  # what it left running in its group
            forget_child(proc)
        seconds = time.monotonic() - started
        pid_file.unlink(missing_ok=True)
        if before_commit is not None:
            before_commit()
        if dirs is not None and branch:
            committed = git.commit_onto(dirs.common_dir, worktree, branch, commit_message)
        else:
            committed = git.commit_all(worktree, commit_message, at=dirs)
        if cancelled:
            reason = "cancelled by the leader; process group killed"
        elif timed_out:
            reason = f"agent exceeded its deadline of {deadline_seconds:g}s; process group killed"
        elif code != 0:
            reason = f"agent exited with status {code}"
            if sandboxed and code is not None and 128 < code < 160:
                reason += f" (in the sandbox: killed by signal {code - 128})"
        else:
            reason = ""
        return AgentRun(code, timed_out, seconds, log, committed, reason, sandboxed)


def kill_orphan(attempt_dir: Path) -> int | None:
    """End the process group of an agent left running by a leader that died (its pid is
    in ``attempt_dir/agent.pid``); return the pid when one was killed."""
    pid_file = attempt_dir / AGENT_PID_FILE
    try:
        pid = int(read_beneath(attempt_dir, AGENT_PID_FILE, 64).strip())
    except (OSError, ValueError, UnsafeFile):
        return None
    if not _an_agent(pid):
        pid_file.unlink(missing_ok=True)
        return None
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pid_file.unlink(missing_ok=True)
        return None
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            os.killpg(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    pid_file.unlink(missing_ok=True)
    with contextlib.suppress(OSError), os.fdopen(open_append(attempt_dir / "agent.log"), "a") as log:
        log.write("\n[tenure] agent left running by a stopped leader; process group killed\n")
    return pid


def _an_agent(pid: int) -> bool:
    """Whether ``pid`` is an agent Tenure started (its environment names its worktree),
    so a pid file never makes the leader kill anything else; True where /proc is not."""
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except FileNotFoundError:
        return not Path("/proc/self").exists()
    except OSError:
        return False
    return b"TENURE_WORKTREE=" in environ


def _write_pid(path: Path, pid: int) -> None:
    _write_new(path, f"{pid}\n", 0o644)


def _write_new(path: Path, text: str, mode: int = 0o600) -> None:
    """Write ``path`` afresh, never through a link an earlier process left there."""
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
    with os.fdopen(fd, "w") as fh:
        fh.write(text)


_PLACEHOLDER = re.compile(r"\{(\w+)\}")


def fill(text: str, values: Mapping[str, str]) -> str:
    """``text`` with each known ``{name}`` replaced; any other brace is kept as written
    (a JSON or TOML argument is not a format string)."""
    return _PLACEHOLDER.sub(lambda m: values.get(m[1], m[0]), text)
