"""A scripted research agent for the demo and examples: reads vendor pages, returns prices.

It behaves like a careful agent (every value with a source and retrieval time,
unknown values null, a blocked question when its input is missing) unless
``TENURE_AGENT_LIES=1``: then its first attempt of each task claims success
without any evidence, as an overconfident model does.
"""

from __future__ import annotations

import json
import os
import re
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tenure.executors.base import TaskContext, make_result
from tenure.protocol import TaskEnvelope, TaskResult

_PRICE = re.compile(r"^price:\s*(?:\$|USD\s*)?([0-9]+(?:\.[0-9]+)?)", re.IGNORECASE | re.MULTILINE)
_FIELD = re.compile(r"^(plan|currency):\s*(.+)$", re.IGNORECASE | re.MULTILINE)


def pricing_agent(envelope: TaskEnvelope, ctx: TaskContext) -> TaskResult:
    """Extract one vendor's price, or merge all of them when given dependency artifacts."""
    time.sleep(float(os.environ.get("TENURE_AGENT_SECONDS", "0.6")))
    if "from_dependencies" in envelope.input:
        return _merge(envelope, ctx)
    return _extract(envelope, ctx)


def _extract(envelope: TaskEnvelope, ctx: TaskContext) -> TaskResult:
    vendor = str(envelope.input.get("vendor", envelope.task_id))
    page = Path(ctx.workdir or ".") / str(envelope.input.get("page", f"vendors/{vendor}.txt"))
    if not page.is_file():
        return make_result(
            envelope,
            "blocked",
            question=f"no page for {vendor} at {page}; where is its price list?",
        )
    text = page.read_text(encoding="utf-8")
    fields = {k.lower(): v.strip() for k, v in _FIELD.findall(text)}
    price = _PRICE.search(text)
    artifact: dict[str, Any] = {
        "vendor": vendor,
        "plan": fields.get("plan"),
        "monthly_usd": float(price.group(1)) if price else None,
        "currency": fields.get("currency"),
    }
    if os.environ.get("TENURE_AGENT_LIES") == "1" and envelope.attempt == 1:
        return make_result(
            envelope,
            "completed",
            artifact=artifact,
            notes={"verified": ["checked every price on the vendor site"]},
        )
    now = datetime.now(UTC).isoformat()
    evidence = [
        {"kind": "source", "source": str(page), "retrieved_at": now, "field": name}
        for name, value in artifact.items()
        if value is not None
    ]
    return make_result(
        envelope,
        "completed",
        artifact=artifact,
        evidence=evidence,
        grounding=[{"input": str(page), "at": now}],
        notes={"uncertain": [f"{k} not published" for k, v in artifact.items() if v is None]},
    )


def _merge(envelope: TaskEnvelope, ctx: TaskContext) -> TaskResult:
    rows = [row for row in envelope.input["from_dependencies"].values() if isinstance(row, dict)]
    rows.sort(key=lambda row: str(row.get("vendor")))
    target = Path(ctx.workdir or ".") / str(envelope.input.get("output", "pricing.json"))

    def write() -> str:
        target.write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
        return str(target)

    written = ctx.effect("write-output", write)
    return make_result(
        envelope,
        "completed",
        artifact={"file": written, "vendors": len(rows)},
        notes={"changed": [written]},
    )
