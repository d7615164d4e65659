"""Tenure: leader/follower teams of AI agents that survive their own failures.

Everything a program needs is here, so it never depends on where a name lives
inside the package (those modules may move; these names stay)::

    import tenure

    plan = tenure.load_plan("plan.yaml")
    result = tenure.Team(plan, executor=my_function).run()
    if not result.ok:
        ...  # result.outcome is "blocked", "failed" or "stopped": see tenure.inbox

- a local run: ``Team``, ``RunResult``, ``TaskOutcome``;
- plans: ``Plan``, ``PlanTask``, ``load_plan``, ``parse_plan``;
- messages on the wire: ``parse_message``, ``to_json``, ``json_schema``, ``new_id``,
  ``idempotency_key``;
- stores: ``open_store`` (``sqlite:///path``, ``redis://host:port/db``, ``memory://``),
  ``Store``;
- reading a store: ``tasks``, ``results``, ``decisions``, ``Task``; the operator's side:
  ``inbox``, ``answer``, ``cancel``, ``replan`` (a goal shift), ``start_over``;
- members in processes of their own: ``Leader``, ``LeaderConfig``, ``Follower``,
  ``FollowerConfig``, ``QueueWorker``, ``enqueue_plan``, ``LeaseTiming``;
- doing the work: ``Executor``, ``TaskContext``, ``TaskEnvelope``, ``TaskResult``,
  ``PythonExecutor``, ``CommandExecutor``, ``ScriptedExecutor``, ``resolve_executor``,
  ``make_result``, ``failed``;
- models: ``LLMExecutor``, ``Model``, ``ChatMessage``, ``ScriptedModel``, ``open_model``,
  ``Planner``, ``Splitter``, ``artifacts_from``, ``Trust``; ``allow_model_requests`` (the
  one door through the no-real-model-requests switch of a test suite);
- leader hooks: ``LeaderHook``, ``LeaderContext`` and what they answer with (``GO``,
  ``HOLD``, ``Stop``, ``Dispatch``, ``Review``), a task's ``AttemptData``;
- coding-agent teams: ``CodingLeader``, ``CodingConfig``, ``CodingOutcome``, ``AgentCLI``,
  ``AgentModel``;
- traces: ``trace_with`` (hand Tenure an OpenTelemetry tracer provider);
- errors: ``TenureError`` and ``ProtocolError``, ``ConfigError``, ``StoreError``,
  ``StoreUnavailable`` (``StoreUnreachable``), ``StoreLost``, ``StaleEpoch``, ``LeaseLost``, ``Conflict``, ``NotFound``,
  ``ModelError``.

See docs/python-api.md.
"""

from tenure.coord import LeaseTiming
from tenure.executors import (
    CommandExecutor,
    Executor,
    PythonExecutor,
    ScriptedExecutor,
    TaskContext,
    failed,
    make_result,
    resolve_executor,
)
from tenure.executors.agent_cli import AgentCLI
from tenure.executors.agent_model import AgentModel
from tenure.executors.llm import LLMExecutor
from tenure.models import (
    ChatMessage,
    Model,
    ModelError,
    ScriptedModel,
    allow_model_requests,
    open_model,
)
from tenure.observe import install as trace_with
from tenure.protocol import (
    ConfigError,
    Conflict,
    LeaseLost,
    NotFound,
    Plan,
    PlanTask,
    ProtocolError,
    StaleEpoch,
    StoreError,
    StoreLost,
    StoreUnavailable,
    StoreUnreachable,
    TaskEnvelope,
    TaskResult,
    TenureError,
    idempotency_key,
    json_schema,
    load_plan,
    new_id,
    parse_message,
    parse_plan,
    to_json,
)
from tenure.protocol.taskspec import AttemptData
from tenure.protocol.version import package_version as _package_version
from tenure.roles.coding import CodingConfig, CodingLeader, CodingOutcome
from tenure.roles.features import Splitter
from tenure.roles.leader import (
    GO,
    HOLD,
    Dispatch,
    LeaderConfig,
    LeaderContext,
    LeaderHook,
    Review,
    Stop,
)
from tenure.roles.member import Follower, FollowerConfig
from tenure.roles.planning import Planner, artifacts_from
from tenure.roles.register import Task
from tenure.roles.teams import Leader, QueueWorker, RunResult, TaskOutcome, Team, enqueue_plan
from tenure.roles.teams.fresh import start_over
from tenure.roles.teams.inbox import answer, cancel, inbox
from tenure.roles.teams.reading import decisions, results, tasks
from tenure.roles.teams.replan import replan
from tenure.store import Store, open_store
from tenure.verify import Trust

__version__ = _package_version()

__all__ = [
    "GO",
    "HOLD",
    "AgentCLI",
    "AgentModel",
    "AttemptData",
    "ChatMessage",
    "CodingConfig",
    "CodingLeader",
    "CodingOutcome",
    "CommandExecutor",
    "ConfigError",
    "Conflict",
    "Dispatch",
    "Executor",
    "Follower",
    "FollowerConfig",
    "LLMExecutor",
    "Leader",
    "LeaderConfig",
    "LeaderContext",
    "LeaderHook",
    "LeaseLost",
    "LeaseTiming",
    "Model",
    "ModelError",
    "NotFound",
    "Plan",
    "PlanTask",
    "Planner",
    "ProtocolError",
    "PythonExecutor",
    "QueueWorker",
    "Review",
    "RunResult",
    "ScriptedExecutor",
    "ScriptedModel",
    "Splitter",
    "StaleEpoch",
    "Stop",
    "Store",
    "StoreError",
    "StoreLost",
    "StoreUnavailable",
    "StoreUnreachable",
    "Task",
    "TaskContext",
    "TaskEnvelope",
    "TaskOutcome",
    "TaskResult",
    "Team",
    "TenureError",
    "Trust",
    "allow_model_requests",
    "answer",
    "artifacts_from",
    "cancel",
    "decisions",
    "enqueue_plan",
    "failed",
    "idempotency_key",
    "inbox",
    "json_schema",
    "load_plan",
    "make_result",
    "new_id",
    "open_model",
    "open_store",
    "parse_message",
    "parse_plan",
    "replan",
    "resolve_executor",
    "results",
    "start_over",
    "tasks",
    "to_json",
    "trace_with",
]
