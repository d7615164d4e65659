"""The example's scripted models: a planner and a worker that answer like careful LLMs.

Deterministic and offline, so the example (and CI) runs without a provider. The
planner answers with plan.yaml's tasks (without its command check when the system
prompt does not offer command checks: the operator has not allowed them); the worker reads the page the prompt
shows it and extracts plan, price and currency, citing the page for each value,
or merges the rows its dependencies returned. ``respond`` tells the two apart by
the system prompt, so one function serves a ScriptedModel and the local
wire-format server in the tests alike.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

from tenure import ChatMessage

HERE = Path(__file__).resolve().parent
_PRICE = re.compile(r"^price:\s*(?:\$|USD\s*)?([0-9]+(?:\.[0-9]+)?)", re.IGNORECASE | re.MULTILINE)
_FIELD = re.compile(r"^(plan|currency):\s*(.+)$", re.IGNORECASE | re.MULTILINE)


def respond(messages: list[ChatMessage]) -> dict[str, Any]:
    system = messages[0].content if messages and messages[0].role == "system" else ""
    if system.startswith("You are the planner"):
        return planner_reply(messages)
    return worker_reply(messages)


def planner_reply(messages: list[ChatMessage]) -> dict[str, Any]:
    if "failed every attempt" in messages[1].content:
        return {"tasks": []}  # this planner does not know how to split; the task goes to a person
    plan = yaml.safe_load((HERE / "plan.yaml").read_text(encoding="utf-8"))
    tasks = plan["tasks"]
    if '"kind": "command"' not in messages[0].content:  # not offered: the operator forbids it
        tasks = [{**t, "checks": [c for c in t.get("checks", []) if c["kind"] != "command"]} for t in tasks]
    return {"tasks": tasks}


def worker_reply(messages: list[ChatMessage]) -> dict[str, Any]:
    prompt = messages[1].content
    deps = _json_section(prompt, "## Results of the tasks this one depends on")
    if deps is not None:
        rows = sorted(
            (row for row in deps.values() if isinstance(row, dict)), key=lambda r: r["vendor"]
        )
        return {"status": "completed", "artifact": rows, "notes": {"changed": ["pricing.json"]}}
    task_input = _json_section(prompt, "## Input") or {}
    vendor, page = str(task_input.get("vendor", "")), str(task_input.get("page", ""))
    text = _material(prompt, page)
    if text is None:
        return {
            "status": "blocked",
            "question": f"I was not given {page}; where is {vendor}'s price list?",
        }
    fields = {k.lower(): v.strip() for k, v in _FIELD.findall(text)}
    price = _PRICE.search(text)
    row = {
        "vendor": vendor,
        "plan": fields.get("plan"),
        "monthly_usd": float(price.group(1)) if price else None,
        "currency": fields.get("currency"),
    }
    return {
        "status": "completed",
        "artifact": row,
        "evidence": [{"source": page, "field": k} for k, v in row.items() if v is not None],
        "notes": {"uncertain": [f"{k} is not published" for k, v in row.items() if v is None]},
    }


def _json_section(prompt: str, heading: str) -> Any:
    if heading not in prompt:
        return None
    block = prompt.split(heading, 1)[1].split("```json\n", 1)[1].split("\n```", 1)[0]
    return json.loads(block)


def _material(prompt: str, name: str) -> str | None:
    marker = f"### {name} (read "
    if not name or marker not in prompt:
        return None
    return prompt.split(marker, 1)[1].split("```\n", 1)[1].split("\n```", 1)[0]
