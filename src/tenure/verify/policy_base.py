"""What every tie-break policy is: a named object that decides, abstains or escalates.

The base class holds the helpers the policies share, so each policy's ``decide``
reads as its rule and nothing else.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

from tenure.verify.decisions import Candidate, Decision
from tenure.verify.quorum import Comparator, group
from tenure.verify.trust import Trust


@dataclass
class DecisionContext:
    """What a policy may use besides the candidates."""

    decision: str = "default"
    criteria: list[str] = field(default_factory=list)
    comparator: str = "exact"
    trust: Trust = field(default_factory=Trust)

    def compare_key(self) -> Comparator:
        return self.trust.comparator(self.comparator)


class Policy(ABC):
    """A named, inspectable tie-break policy."""

    name: str = "policy"

    @abstractmethod
    def decide(self, candidates: list[Candidate], context: DecisionContext) -> Decision:
        """Pick a winner among ``candidates``, escalate, or say why it cannot."""

    @abstractmethod
    def describe(self) -> str:
        """What the policy does, in plain words, with its parameters."""

    def params(self) -> dict[str, Any]:
        return {}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.params()})"

    # helpers shared by the policies

    def _answers(
        self, candidates: list[Candidate], context: DecisionContext
    ) -> list[list[Candidate]]:
        return group(candidates, context.compare_key())

    def _abstain(self, reason: str) -> Decision:
        return Decision(self.name, None, reason, abstained=True)

    def _win(self, candidate: Candidate, reason: str, **details: Any) -> Decision:
        return Decision(self.name, candidate.ref, reason, details=details)
