"""Traces: a real local team with an LLM worker on a scripted model, its spans caught
by the OpenTelemetry SDK's in-memory exporter; a signed leader and follower on threads
of their own, joined only by what the envelopes carry; a queue worker joining its
producer's run; and child processes exporting over OTLP/HTTP to a local server,
configured by the standard variables alone.

The run: ``draft`` (an LLM worker; its command check fails the first time, so it
takes two attempts) and ``note`` after it (no checks: a self-report).
"""

from __future__ import annotations

import http.server
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import tenure
from tenure import observe
from tenure.coord import Credentials, LeaseTiming, SignatureRefused
from tenure.coord.credentials import init_team
from tenure.models import count_tokens
from tenure.observe.spans import wanted
from tenure.protocol import TaskEnvelope
from tenure.protocol.secrets import register_secret
from tenure.roles import FollowerConfig, LeaderConfig
from tenure.roles.member import Follower, Mailbox
from tenure.roles.member.wire import ENVELOPE, WORK_QUEUE
from tenure.roles.teams import Leader, QueueWorker, enqueue_plan

CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
try:
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import SpanKind, StatusCode
except ImportError:  # pragma: no cover - the dev extra installs it
    if CI:
        raise
    pytest.skip(
        "OpenTelemetry is not installed: pip install 'tenure[otel]'", allow_module_level=True
    )

TEAM = "traced"
REPLY = {"status": "completed", "artifact": {"text": "a short draft"}, "notes": {"verified": []}}
REPLY_TEXT = json.dumps(REPLY)


def plan() -> tenure.Plan:
    once = "test -f checked || { touch checked; echo not yet; exit 1; }"
    return tenure.Plan.model_validate(
        {
            "team": TEAM,
            "tasks": [
                {
                    "id": "draft",
                    "goal": "write a draft",
                    "checks": [{"kind": "command", "run": once}],
                },
                {"id": "note", "goal": "note it", "depends_on": ["draft"]},
            ],
        }
    )


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    caught = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(caught))
    observe.install(provider)
    try:
        yield caught
    finally:
        observe.install(None)
        provider.shutdown()


def named(spans: tuple[ReadableSpan, ...], prefix: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name.startswith(prefix)]


def parent_of(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def test_a_run_is_a_tree_of_workflow_agent_chat_and_check_spans(
    exporter: InMemorySpanExporter, tmp_path: Path
) -> None:
    model = tenure.ScriptedModel([REPLY])
    team = tenure.Team(
        plan(),
        executor=tenure.LLMExecutor(model),
        store=f"sqlite:///{tmp_path / 'state.db'}",  # opened and closed by the run
        workdir=tmp_path,
    )
    assert team.run(timeout=30).ok
    spans = exporter.get_finished_spans()

    [run] = named(spans, "invoke_workflow ")
    assert run.name == f"invoke_workflow {TEAM}" and run.parent is None
    assert run.attributes is not None
    assert run.attributes["gen_ai.operation.name"] == "invoke_workflow"
    assert run.attributes["gen_ai.workflow.name"] == TEAM
    assert run.attributes["tenure.outcome"] == "settled"
    assert run.attributes["tenure.epoch"] == 1
    assert {s.context.trace_id for s in spans} == {run.context.trace_id}  # one trace

    agents = named(spans, "invoke_agent ")
    seen = sorted((a.attributes["tenure.task.id"], a.attributes["tenure.attempt"]) for a in agents)  # type: ignore[index]
    assert seen == [("draft", 1), ("draft", 2), ("note", 1)]
    for agent in agents:
        attributes = agent.attributes or {}
        assert parent_of(agent) == run.context.span_id
        assert attributes["gen_ai.operation.name"] == "invoke_agent"
        assert agent.name == f"invoke_agent {attributes['gen_ai.agent.name']}"
        assert str(attributes["gen_ai.agent.name"]).startswith("worker-")
        assert attributes["tenure.epoch"] == 1
        assert attributes["tenure.result.status"] == "completed"
        key = f"{attributes['tenure.task.id']}:attempt-{attributes['tenure.attempt']}"
        assert attributes["tenure.idempotency_key"] == key

    chats = named(spans, "chat ")
    assert len(chats) == len(model.calls) == 3
    agent_ids = {a.context.span_id for a in agents}
    for chat, prompt in zip(
        sorted(chats, key=lambda s: s.start_time or 0), model.calls, strict=True
    ):
        attributes = chat.attributes or {}
        assert chat.name == "chat scripted" and chat.kind is SpanKind.CLIENT
        assert parent_of(chat) in agent_ids
        assert attributes["gen_ai.operation.name"] == "chat"
        assert attributes["gen_ai.provider.name"] == "scripted"
        assert attributes["gen_ai.request.model"] == "scripted"
        assert attributes["gen_ai.usage.input_tokens"] == sum(
            count_tokens(m.content) for m in prompt
        )
        assert attributes["gen_ai.usage.output_tokens"] == count_tokens(REPLY_TEXT)

    verifies = sorted(named(spans, "verify "), key=lambda s: s.start_time or 0)
    assert [(v.name, (v.attributes or {})["tenure.attempt"]) for v in verifies] == [
        ("verify draft", 1),
        ("verify draft", 2),
        ("verify note", 1),
    ]
    assert [(v.attributes or {})["tenure.verdict.passed"] for v in verifies] == [False, True, True]
    assert (verifies[0].attributes or {})["tenure.verdict.failed_check"] == "command"
    assert all(parent_of(v) == run.context.span_id for v in verifies)
    checks = sorted(named(spans, "check "), key=lambda s: s.start_time or 0)
    assert [(c.name, parent_of(c)) for c in checks] == [
        ("check command", verifies[0].context.span_id),
        ("check command", verifies[1].context.span_id),
    ]
    assert [(c.attributes or {})["tenure.verdict.passed"] for c in checks] == [False, True]
    assert "not yet" in str((checks[0].attributes or {})["tenure.verdict.reason"])
    assert checks[0].status.status_code is not StatusCode.ERROR  # a verdict, not a fault


def background(target: Any, *args: Any) -> threading.Thread:
    """A plain thread: it inherits no span (threads start with an empty context)."""
    thread = threading.Thread(target=target, args=args, daemon=True)
    thread.start()
    return thread


def test_a_leader_and_its_follower_share_one_trace_through_the_envelope(
    exporter: InMemorySpanExporter, tmp_path: Path
) -> None:
    """Team mode in one process: a signed leader and a signed follower on threads of
    their own, sharing nothing but the store; the envelope's traceparent joins them."""
    keys = tmp_path / "keys"
    init_team(keys, TEAM, ["w1"])
    store = tenure.open_store(f"sqlite:///{tmp_path / 'state.db'}")
    model = tenure.ScriptedModel([REPLY])
    follower = Follower(
        store,
        FollowerConfig(
            team=TEAM,
            member_id="w1",
            poll_interval=0.01,
            state_dir=tmp_path,
            credentials=Credentials.load(keys, TEAM, "w1", "work"),
        ),
        tenure.LLMExecutor(model),
    )
    leader = Leader(
        store,
        LeaderConfig(
            team=TEAM,
            member_id="leader",
            timing=LeaseTiming(ttl=2.0),
            poll_interval=0.01,
            state_dir=tmp_path,
            workdir=tmp_path,
            credentials=Credentials.load(keys, TEAM, "leader", "lead"),
        ),
        plan(),
    )
    stop, done = threading.Event(), threading.Event()
    working = background(follower.run, stop)
    outcome: list[Any] = []
    leading = background(lambda: (outcome.append(leader.run(done)), stop.set()))
    try:
        leading.join(timeout=60)
    finally:
        stop.set()
        done.set()
        working.join(timeout=10)
        leading.join(timeout=10)
        store.close()
    assert [result.outcome for result in outcome] == ["done"]
    spans = exporter.get_finished_spans()

    [run] = named(spans, "invoke_workflow ")
    assert run.parent is None and (run.attributes or {})["tenure.outcome"] == "settled"
    assert {s.context.trace_id for s in spans} == {run.context.trace_id}  # one trace
    agents = named(spans, "invoke_agent ")
    assert sorted((a.attributes or {})["tenure.attempt"] for a in agents) == [1, 1, 2]
    for agent in agents:
        assert agent.name == "invoke_agent w1"
        assert agent.parent is not None and agent.parent.is_remote  # from the envelope
        assert parent_of(agent) == run.context.span_id
    agent_ids = {a.context.span_id for a in agents}
    assert len(named(spans, "chat ")) == 3
    assert all(parent_of(c) in agent_ids for c in named(spans, "chat "))
    verifies = named(spans, "verify ")
    assert len(verifies) == 3 and all(parent_of(v) == run.context.span_id for v in verifies)
    verify_ids = {v.context.span_id for v in verifies}
    assert [parent_of(c) in verify_ids for c in named(spans, "check ")] == [True, True]


def test_the_traceparent_is_signed_with_the_envelope(tmp_path: Path) -> None:
    init_team(tmp_path, TEAM, ["w1"])
    lead = Credentials.load(tmp_path, TEAM, "leader", "lead")
    worker = Credentials.load(tmp_path, TEAM, "w1", "work")
    envelope = TaskEnvelope(
        task_id="t1",
        idempotency_key="t1:attempt-1",
        epoch=1,
        attempt=1,
        assigned_to="w1",
        deadline_seconds=30,
        goal="g",
        traceparent="00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
    )
    signed = Mailbox(None, TEAM, "leader", credentials=lead).signed(ENVELOPE, envelope)  # type: ignore[arg-type]
    worker.verify(ENVELOPE, signed, signed.signature, by="lead")
    moved = signed.model_copy(
        update={"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-1111111111111111-01"}
    )
    with pytest.raises(SignatureRefused):  # a traceparent changed on the way is caught
        worker.verify(ENVELOPE, moved, moved.signature, by="lead")


def test_a_queue_workers_attempt_and_review_join_the_producers_run(
    exporter: InMemorySpanExporter, tmp_path: Path
) -> None:
    store = tenure.open_store(f"sqlite:///{tmp_path / 'state.db'}")
    queued = tenure.Plan.model_validate(
        {
            "team": TEAM,
            "tasks": [{"id": "one", "goal": "g", "checks": [{"kind": "command", "run": "true"}]}],
        }
    )
    with observe.run(TEAM, mode="queue"):
        enqueue_plan(store, queued)
    worker = QueueWorker(store, TEAM, "q1", tenure.resolve_executor("noop"), workdir=tmp_path)
    try:
        assert worker.poll_once(wait=1.0)
        assert store.get_task(TEAM, "one").state == "done"
    finally:
        store.close()
    spans = exporter.get_finished_spans()
    [run] = named(spans, "invoke_workflow ")
    assert (run.attributes or {})["tenure.mode"] == "queue"
    assert {s.context.trace_id for s in spans} == {run.context.trace_id}
    [agent] = named(spans, "invoke_agent ")
    [verify] = named(spans, "verify ")
    assert parent_of(agent) == parent_of(verify) == run.context.span_id


def test_without_tracing_an_envelope_carries_no_traceparent(tmp_path: Path) -> None:
    observe.install(None)
    store = tenure.open_store(f"sqlite:///{tmp_path / 'state.db'}")
    try:
        one = tenure.Plan.model_validate({"team": TEAM, "tasks": [{"id": "one", "goal": "g"}]})
        with observe.run(TEAM, mode="queue"):
            enqueue_plan(store, one)
        [delivery] = store.receive(TEAM, WORK_QUEUE, consumer="q1", visibility_timeout=5)
    finally:
        store.close()
    assert delivery.payload["body"]["traceparent"] is None


def test_attribute_text_is_redacted_and_a_raised_error_marks_the_span(
    exporter: InMemorySpanExporter,
) -> None:
    secret = "sk-trace-81d0c3b5a2"
    register_secret(secret)
    with pytest.raises(ValueError), observe.span("outer", {"note": f"key {secret}"}) as span:
        span.set("tenure.reason", f"it printed {secret}")
        raise ValueError("boom")
    [outer] = exporter.get_finished_spans()
    assert outer.attributes == {
        "note": "key ***",
        "tenure.reason": "it printed ***",
        "error.type": "ValueError",
    }
    assert outer.status.status_code is StatusCode.ERROR
    assert outer.status.description == "boom"
    assert list(outer.events) == []  # the exception's text only as the (redacted) status


SCRIPT = """
import sys, tenure
from tenure import observe
plan = tenure.Plan.model_validate({"team": "exported", "tasks": [{"id": "one", "goal": "g"}]})
store = tenure.open_store("sqlite:///" + sys.argv[1])
assert tenure.Team(plan, executor="noop", store=store).run(timeout=30).ok
if len(sys.argv) > 2:  # a whole run, envelopes and all, imported nothing of OpenTelemetry
    with observe.span("plain"):
        pass
    print(observe.enabled(), observe.traceparent(), "opentelemetry" in sys.modules)
"""


class Collector(http.server.BaseHTTPRequestHandler):
    bodies: list[tuple[str, str, bytes]] = []

    def do_POST(self) -> None:  # noqa: N802 - the http.server API
        length = int(self.headers.get("Content-Length", 0))
        type(self).bodies.append(
            (self.path, self.headers.get("Content-Type", ""), self.rfile.read(length))
        )
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        return None


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "TENURE_OTEL"))}
    env.pop("PYTEST_CURRENT_TEST", None)
    return {**env, **extra}


def test_the_standard_variables_export_over_otlp_http(tmp_path: Path) -> None:
    Collector.bodies = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Collector)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        endpoint = f"http://127.0.0.1:{server.server_address[1]}"
        env = clean_env(OTEL_EXPORTER_OTLP_ENDPOINT=endpoint, OTEL_SERVICE_NAME="pricing")
        done = subprocess.run(
            [sys.executable, "-c", SCRIPT, str(tmp_path / "state.db")],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr
    finally:
        server.shutdown()
        server.server_close()
    assert Collector.bodies, "nothing was exported"
    paths = {path for path, _, _ in Collector.bodies}
    assert paths == {"/v1/traces"}
    assert {kind for _, kind, _ in Collector.bodies} == {"application/x-protobuf"}
    sent = b"".join(body for _, _, body in Collector.bodies)
    for text in (b"invoke_workflow exported", b"invoke_agent worker-", b"verify one", b"pricing"):
        assert text in sent, text


@pytest.fixture
def collector() -> Iterator[str]:
    """A local OTLP/HTTP receiver; its endpoint."""
    Collector.bodies = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Collector)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def received() -> list[Any]:
    """Every span the collector was sent, decoded, with its process's ``service.name``."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    spans = []
    for _, _, body in Collector.bodies:
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        for resource in request.resource_spans:
            for scope in resource.scope_spans:
                spans.extend(scope.spans)
    return spans


@pytest.mark.parametrize("mode", ["team", "queue"])
def test_a_run_of_member_processes_is_one_trace(collector: str, tmp_path: Path, mode: str) -> None:
    """``tenure run`` starting its workers as processes: the leader's term (or the queue
    run) and every worker's attempt arrive as one trace, each attempt parented by the
    span its envelope carried from the other process."""
    (tmp_path / "plan.yaml").write_text(
        "team: crossed\ntasks:\n  - {id: a, goal: say a}\n  - {id: b, goal: say b}\n"
    )
    env = clean_env(OTEL_EXPORTER_OTLP_ENDPOINT=collector, OTEL_BSP_SCHEDULE_DELAY="100")
    done = subprocess.run(
        [sys.executable, "-m", "tenure", "run", "plan.yaml", "--mode", mode, "--json"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    spans = received()
    [run] = [s for s in spans if s.name == "invoke_workflow crossed"]
    agents = [s for s in spans if s.name.startswith("invoke_agent worker-")]
    verifies = [s for s in spans if s.name.startswith("verify ")]
    assert len(agents) == 2 and len(verifies) == 2, [s.name for s in spans]
    assert run.parent_span_id == b""  # the root
    assert {s.trace_id for s in spans} == {run.trace_id}
    assert {s.parent_span_id for s in agents + verifies} == {run.span_id}


def test_without_the_variables_nothing_imports_opentelemetry(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path / "x.db"), "probe"],
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "None", "False"]


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, True),
        ({"TENURE_OTEL": "1"}, True),
        ({"TENURE_OTEL": "0", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, False),
        ({"TENURE_OTEL": "1", "OTEL_SDK_DISABLED": "true"}, False),
    ],
)
def test_which_variables_turn_traces_on(env: dict[str, str], expected: bool) -> None:
    assert wanted(env) is expected
