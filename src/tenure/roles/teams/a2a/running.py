"""A served team for as long as it is served: the HTTP server in a thread and, with
an executor, the team's queue workers as threads of the same process.

Beyond loopback it serves only with a bearer token: the tasks it accepts are signed
with the team's lead key, so whoever reaches the port gives the team work as its
leader would."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from starlette.applications import Starlette

from tenure.coord import Credentials
from tenure.executors import Executor
from tenure.protocol.errors import ConfigError
from tenure.roles.member.bearer import BearerGuard, is_loopback
from tenure.roles.teams.a2a.led import led
from tenure.roles.teams.a2a.server import A2AServer, bound_socket, build_app
from tenure.roles.teams.queue import QueueWorker
from tenure.store import Store

JOIN_SECONDS = 5.0


@dataclass
class ServedTeam:
    """``team`` of ``store`` as an A2A agent on ``host:port`` (0: a free port)."""

    store: Store
    team: str
    host: str = "127.0.0.1"
    port: int = 0
    executor: Executor | None = None  # None: the team's own queue workers do the work
    worker_ids: Sequence[str] = ()
    credentials: Credentials | None = None  # the lead key: signs the tasks it enqueues
    worker_credentials: Sequence[Credentials | None] = ()
    workdir: Path | None = None
    description: str = ""
    token: str | None = None  # every call must carry it (beyond loopback: required)
    threads: list[threading.Thread] = field(default_factory=list)

    def run(self, stop: threading.Event, on_ready: Callable[[str], None] = print) -> None:
        """Serve until ``stop`` is set; ``on_ready`` gets the URL once it listens."""
        if not is_loopback(self.host) and not self.token:
            raise ConfigError(
                f"--token: serving beyond loopback ({self.host}) needs a bearer token; "
                "every caller could give the team work as its leader otherwise"
            )
        if self.executor is not None:
            check_queue_team(self.store, self.team)
        try:
            sock = bound_socket(self.host, self.port)
        except OSError as exc:
            raise ConfigError(f"--port: cannot listen on {self.host}:{self.port}: {exc}") from None
        server = A2AServer(sock, self._app)
        workers_stop = threading.Event()
        self.threads = [threading.Thread(target=server.run, daemon=True, name="tenure-a2a")]
        self.threads += [
            threading.Thread(target=w.run, args=(workers_stop,), daemon=True, name=w.member_id)
            for w in self._workers()
        ]
        for thread in self.threads:
            thread.start()
        try:
            on_ready(server.url)
            while not stop.wait(0.2):
                if not self.threads[0].is_alive():
                    raise ConfigError(f"the A2A server on {server.url} stopped")
        finally:
            server.stop()
            workers_stop.set()
            for thread in self.threads:
                thread.join(timeout=JOIN_SECONDS)

    def _app(self, url: str) -> Starlette | BearerGuard:
        return build_app(
            self.store,
            self.team,
            url,
            credentials=self.credentials,
            workdir=self.workdir,
            description=self.description,
            token=self.token,
        )

    def _workers(self) -> list[QueueWorker]:
        if self.executor is None:
            return []
        signing = list(self.worker_credentials) or [None] * len(self.worker_ids)
        return [
            QueueWorker(
                self.store,
                self.team,
                member,
                self.executor,
                workdir=self.workdir,
                credentials=credentials,
            )
            for member, credentials in zip(self.worker_ids, signing, strict=True)
        ]


def check_queue_team(store: Store, team: str) -> None:
    """The server's own workers (``--exec``) are queue workers: refuse them for a team a
    leader leads, whose work the leader dispatches to its members."""
    if led(store, team):
        raise ConfigError(
            f"team {team!r} is led by a leader (epoch {store.current_epoch(team)}): its "
            f"work goes to the leader's members (tenure worker --team {team}); --exec runs "
            "queue workers, for a team of its own"
        )
