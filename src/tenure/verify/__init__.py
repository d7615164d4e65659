"""Trust: checks applied by the verifier itself, weakest to strongest; tie-break policies."""

from tenure.verify.checks import Verdict, check_command, check_evidence, check_schema
from tenure.verify.decisions import Candidate, Decision, decision_event, verdict_event
from tenure.verify.judge import Grade, JudgeError, Preference, check_judge, compare, grade
from tenure.verify.ladder import LADDER_ORDER, checks_for, verify
from tenure.verify.policies import (
    AuthorityPolicy,
    Chain,
    ConfidencePolicy,
    DecisionContext,
    FreshestPolicy,
    HumanPolicy,
    JudgePolicy,
    Policy,
    QuorumPolicy,
    build_policy,
    describe_policies,
    policy_for,
)
from tenure.verify.quorum import (
    COMPARATORS,
    correlation_warnings,
    distinct_votes,
    group,
    majority,
)
from tenure.verify.trust import Trust

__all__ = [
    "COMPARATORS",
    "LADDER_ORDER",
    "AuthorityPolicy",
    "Candidate",
    "Chain",
    "ConfidencePolicy",
    "Decision",
    "DecisionContext",
    "FreshestPolicy",
    "Grade",
    "HumanPolicy",
    "JudgeError",
    "JudgePolicy",
    "Policy",
    "Preference",
    "QuorumPolicy",
    "Trust",
    "Verdict",
    "build_policy",
    "check_command",
    "check_evidence",
    "check_judge",
    "check_schema",
    "checks_for",
    "compare",
    "correlation_warnings",
    "decision_event",
    "describe_policies",
    "distinct_votes",
    "grade",
    "group",
    "majority",
    "policy_for",
    "verdict_event",
    "verify",
]
