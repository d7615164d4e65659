"""The demo's world: five vendor pages on disk and a plan to extract their prices."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import yaml

VENDORS: dict[str, str] = {
    "acme": "Plan: Team\nPrice: $29 per user per month\nCurrency: USD\n",
    "bluefin": "Plan: Business\nPrice: $45 per user per month\nCurrency: USD\n",
    "corvid": "Plan: Starter\nPrice: $12 per user per month\nCurrency: USD\n",
    "dunmore": "Plan: Pro\nPrice: $60 per user per month\nCurrency: USD\n",
    "quillsoft": "Plan: Enterprise\nPricing: contact sales (no public price)\nCurrency: USD\n",
}
TEAM = "demo"

ROW_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["vendor", "plan", "monthly_usd", "currency"],
    "additionalProperties": False,
    "properties": {
        "vendor": {"type": "string"},
        "plan": {"type": ["string", "null"]},
        "monthly_usd": {"type": ["number", "null"], "minimum": 0},
        "currency": {"type": ["string", "null"]},
    },
}


def prepare(root: Path) -> Path:
    """Create (or recreate) the demo folder; return the plan's path."""
    if root.exists():
        shutil.rmtree(root)
    (root / "vendors").mkdir(parents=True)
    for name, page in VENDORS.items():
        (root / "vendors" / f"{name}.txt").write_text(page, encoding="utf-8")
    plan_path = root / "plan.yaml"
    plan_path.write_text(yaml.safe_dump(plan(), sort_keys=False), encoding="utf-8")
    return plan_path


def plan() -> dict[str, Any]:
    extract = [
        {
            "id": f"price-{name}",
            "goal": f"Extract {name}'s per-user monthly list price from its pricing page.",
            "acceptance_criteria": [
                "Every value comes from the vendor's page, with the page as its source.",
                "A price the page does not publish is null, never estimated.",
            ],
            "checks": [{"kind": "evidence", "max_age_seconds": 3600}],
            "input": {"vendor": name, "page": f"vendors/{name}.txt"},
            "output_schema": ROW_SCHEMA,
            "deadline_seconds": 20,
        }
        for name in VENDORS
    ]
    check = (
        f"{sys.executable} -c \"import json; rows = json.load(open('pricing.json')); "
        f'assert len(rows) == {len(VENDORS)}, rows"'
    )
    merge = {
        "id": "merge",
        "goal": "Merge the vendor prices into pricing.json, one row per vendor.",
        "acceptance_criteria": ["pricing.json holds exactly one row per vendor."],
        "depends_on": [task["id"] for task in extract],
        "checks": [{"kind": "command", "run": check}],
        "input": {"output": "pricing.json"},
        "deadline_seconds": 20,
    }
    return {
        "team": TEAM,
        "goal": "Price five vendors, every number sourced.",
        "tasks": [*extract, merge],
    }
