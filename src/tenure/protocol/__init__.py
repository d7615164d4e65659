"""The words agents exchange: messages, envelopes, results and plans.

This layer imports nothing else of Tenure's; every other layer builds on it.
"""

from tenure.protocol.codec import (
    load_plan,
    parse_envelope,
    parse_message,
    parse_plan,
    parse_result,
    to_dict,
    to_json,
)
from tenure.protocol.envelope import (
    Check,
    CommandCheck,
    CommandEvidence,
    EvidenceCheck,
    Grounding,
    JudgeCheck,
    Notes,
    PriorAttempt,
    QuorumCheck,
    SchemaCheck,
    SourceEvidence,
    TaskEnvelope,
    TaskResult,
    idempotency_key,
)
from tenure.protocol.errors import (
    ConfigError,
    Conflict,
    EffectInProgress,
    LeaseLost,
    NotFound,
    ProtocolError,
    StaleEpoch,
    StoreError,
    StoreUnavailable,
    TenureError,
)
from tenure.protocol.ids import check_task_id, check_team, new_id
from tenure.protocol.messages import (
    FENCED_TYPES,
    MAX_BODY_BYTES,
    MESSAGE_CLASSES,
    MESSAGE_TYPES,
    PROTOCOL_VERSION,
    Message,
)
from tenure.protocol.plan import Plan, PlanTask
from tenure.protocol.schema import json_schema

__all__ = [
    "FENCED_TYPES",
    "MAX_BODY_BYTES",
    "MESSAGE_CLASSES",
    "MESSAGE_TYPES",
    "PROTOCOL_VERSION",
    "Check",
    "CommandCheck",
    "CommandEvidence",
    "ConfigError",
    "Conflict",
    "EffectInProgress",
    "EvidenceCheck",
    "Grounding",
    "JudgeCheck",
    "LeaseLost",
    "Message",
    "NotFound",
    "Notes",
    "Plan",
    "PlanTask",
    "PriorAttempt",
    "ProtocolError",
    "QuorumCheck",
    "SchemaCheck",
    "SourceEvidence",
    "StaleEpoch",
    "StoreError",
    "StoreUnavailable",
    "TaskEnvelope",
    "TaskResult",
    "TenureError",
    "check_task_id",
    "check_team",
    "idempotency_key",
    "json_schema",
    "load_plan",
    "new_id",
    "parse_envelope",
    "parse_message",
    "parse_plan",
    "parse_result",
    "to_dict",
    "to_json",
]
