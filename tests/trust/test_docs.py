"""docs/verification.md stays true to the code: its plan loads, its tables name every policy."""

from __future__ import annotations

from pathlib import Path

from tenure.protocol import parse_plan
from tenure.protocol.policy import PARAMS, POLICY_NAMES
from tenure.verify import build_policy

DOC = Path(__file__).resolve().parents[2] / "docs" / "verification.md"
TEXT = DOC.read_text(encoding="utf-8")


def test_the_plan_example_loads_and_every_policy_in_it_builds() -> None:
    start = TEXT.index("```yaml\nteam: acme/research")
    block = TEXT[start + len("```yaml\n") : TEXT.index("```\n", start + 8)]
    plan = parse_plan(block)
    assert set(plan.policies) == {"price", "completion", "capital", "default"}
    for spec in plan.policies.values():
        assert build_policy(spec).describe()


def test_every_policy_and_every_parameter_is_documented() -> None:
    for name in POLICY_NAMES:
        assert f"| `{name}` |" in TEXT, name
        for param in PARAMS[name].model_fields:
            assert f"`{param}`" in TEXT, f"{name}.{param}"


def test_every_ladder_rung_is_documented_in_order() -> None:
    from tenure.verify import LADDER_ORDER

    table = TEXT[TEXT.index("## The ladder") : TEXT.index("Rules the leader keeps")]
    for kind, order in LADDER_ORDER.items():
        assert f"| {order + 1} | `{kind}` |" in table, kind
