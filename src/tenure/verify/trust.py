"""``Trust``: what the verifier needs beyond the plan — which models judge, extra comparators.

A plan names judge models by string (``judge: {model: "openai:gpt-4.1"}``); a
``Trust`` turns the string into a ``Model``. Models given in ``models`` (by
name) come first, so tests and examples can put a ``ScriptedModel`` behind any
name; other names go through ``tenure.models.open_model``. A check or policy
that names no model uses ``judge``, else the ``TENURE_MODEL`` setting.

A missing or unusable model is a ``ConfigError`` saying what to set; the ladder
turns it into a failed verdict and a policy into an undecided step, never a pass.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from tenure.models import Model, open_model
from tenure.models.meter import Meter, Metered
from tenure.protocol import ConfigError, TenureError
from tenure.verify.quorum import Comparator
from tenure.verify.quorum import comparator as find_comparator


@dataclass
class Trust:
    judge: Model | None = None
    models: Mapping[str, Model] = field(default_factory=dict)
    comparators: Mapping[str, Comparator] = field(default_factory=dict)
    meter: Meter = field(default_factory=Meter)  # what the judges spent, for the budgets

    def model(self, name: str | None) -> Model:
        """The model called ``name`` (or the default judge), metered; ConfigError if
        there is none."""
        return Metered(self._find(name), self.meter)

    def _find(self, name: str | None) -> Model:
        if name and name in self.models:
            return self.models[name]
        if not name and self.judge is not None:
            return self.judge
        try:
            return open_model(name)
        except TenureError as exc:
            what = f"judge model {name!r}" if name else "judge model"
            raise ConfigError(f"no {what}: {exc}") from None

    def comparator(self, name: str) -> Comparator:
        try:
            return find_comparator(name, self.comparators)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
