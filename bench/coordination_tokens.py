"""Tokens the coordination adds per task, against the bare goal.

On the example plan (examples/vendor-pricing/plan.yaml) each task is run through
the real LLM worker with a ScriptedModel, whose token counter (words) does the
counting, so the figures are exact and repeatable. Per task:

- bare: the goal plus the data it needs (the page, or the dependencies' rows),
  as one message: what a one-shot prompt with no coordination would send;
- envelope: the worker's whole first prompt (system rules, criteria first,
  checks, goal, input, materials, scope, output schema), and what it adds;
- restatement: one multi-turn check-in message (criteria restated);
- repair: the repair message alone, and the whole repair call (the
  conversation is sent again, with the invalid answer and the error).

    .venv/bin/python bench/coordination_tokens.py            # a Markdown table
    .venv/bin/python bench/coordination_tokens.py --json
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "vendor-pricing"
sys.path.insert(0, str(EXAMPLE))

import brain  # noqa: E402  (the example's scripted worker)

from tenure.executors import TaskContext  # noqa: E402
from tenure.executors.llm import LLMExecutor, checkin_message  # noqa: E402
from tenure.models import ScriptedModel, count_tokens  # noqa: E402
from tenure.protocol import Plan, PlanTask, TaskEnvelope, idempotency_key, load_plan  # noqa: E402


def envelope_of(task: PlanTask, deps: dict[str, Any]) -> TaskEnvelope:
    task_input = {**task.input, **({"from_dependencies": deps} if deps else {})}
    return TaskEnvelope.model_validate(
        {
            "task_id": task.id,
            "idempotency_key": idempotency_key(task.id, 1),
            "epoch": 1,
            "attempt": 1,
            "assigned_to": "bench",
            "deadline_seconds": task.deadline_seconds,
            "goal": task.goal,
            "acceptance_criteria": task.acceptance_criteria,
            "checks": [c.model_dump(by_alias=True) for c in task.checks],
            "input": task_input,
            "scope": task.scope,
            "depends_on": task.depends_on,
            "output_schema": task.output_schema,
        }
    )


def measure(plan: Plan, workdir: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    artifacts: dict[str, Any] = {}
    for task in plan.tasks:
        deps = {d: artifacts[d] for d in task.depends_on}
        env = envelope_of(task, deps)
        ctx = TaskContext(worker_id="bench", team="bench", workdir=workdir, envelope=env)

        # one clean attempt: the envelope prompt
        clean = ScriptedModel(brain.respond)
        result = LLMExecutor(clean).execute(env, ctx)
        artifacts[task.id] = result.artifact
        first = clean.calls[0]
        prompt = sum(count_tokens(m.content) for m in first)
        data = _data_tokens(task, deps, workdir)
        bare = count_tokens(task.goal) + data

        # an attempt whose first answer is invalid: one repair
        bad_then_good = ScriptedModel(["not json"] + [brain.respond(first)])
        LLMExecutor(bad_then_good).execute(env, ctx)
        repair_call = sum(count_tokens(m.content) for m in bad_then_good.calls[1])
        repair_only = count_tokens(bad_then_good.calls[1][-1].content)

        rows.append(
            {
                "task": task.id,
                "goal": count_tokens(task.goal),
                "data": data,
                "bare": bare,
                "envelope": prompt,
                "envelope_added": prompt - bare,
                "system": count_tokens(first[0].content),
                "criteria": _section(first[1].content, "## Acceptance criteria", "## Goal"),
                "schema": _section(first[1].content, "## Output", None),
                "restatement": count_tokens(checkin_message(env, 2, 3)),
                "repair_message": repair_only,
                "repair_call": repair_call,
                "answer": count_tokens(json.dumps(brain.respond(first))),
            }
        )
    return rows


def _section(prompt: str, start: str, end: str | None) -> int:
    """Tokens of the prompt from ``start`` up to ``end`` (or the end)."""
    text = prompt.split(start, 1)[1]
    if end is not None:
        text = text.split(end, 1)[0]
    return count_tokens(start + text)


def _data_tokens(task: PlanTask, deps: dict[str, Any], workdir: Path) -> int:
    """What the task needs to read, however it is prompted: its page, its inputs' rows."""
    total = 0
    page = task.input.get("page")
    if isinstance(page, str) and (workdir / page).is_file():
        total += count_tokens((workdir / page).read_text(encoding="utf-8"))
    if deps:
        total += count_tokens(json.dumps(deps))
    return total


def table(rows: list[dict[str, Any]]) -> str:
    head = (
        "| task | bare goal + data | envelope prompt | added | system rules "
        "| criteria + checks | output schema | restatement / check-in | repair message "
        "| repair call |\n"
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n"
    )
    n = len(rows)
    mean: dict[str, Any] = {k: sum(r[k] for r in rows) / n for k in rows[0] if k != "task"}
    mean["task"] = "**mean**"
    lines = []
    for r in [*rows, mean]:
        name = r["task"] if r is mean else f"`{r['task']}`"
        lines.append(
            f"| {name} | {r['bare']:.0f} | {r['envelope']:.0f} | +{r['envelope_added']:.0f} "
            f"({r['envelope'] / max(r['bare'], 1):.1f}x) | {r['system']:.0f} "
            f"| {r['criteria']:.0f} | {r['schema']:.0f} | {r['restatement']:.0f} "
            f"| {r['repair_message']:.0f} | {r['repair_call']:.0f} |"
        )
    return head + "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="one JSON object per task")
    args = parser.parse_args()
    plan = load_plan(EXAMPLE / "plan.yaml")
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        shutil.copytree(EXAMPLE / "vendors", workdir / "vendors")
        rows = measure(plan, workdir)
    if args.json:
        for row in rows:
            print(json.dumps(row))
    else:
        print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
