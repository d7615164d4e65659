"""Trust: checks applied by the verifier itself, weakest to strongest."""

from tenure.verify.checks import Verdict, check_command, check_evidence, check_schema
from tenure.verify.ladder import LADDER_ORDER, checks_for, verify

__all__ = [
    "LADDER_ORDER",
    "Verdict",
    "check_command",
    "check_evidence",
    "check_schema",
    "checks_for",
    "verify",
]
