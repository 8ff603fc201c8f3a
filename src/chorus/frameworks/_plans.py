"""The pure parts of the thinking frameworks: prompts, parsing what a model returns,
and the rule-based arbiter. No I/O: the runner feeds these text and gets text.

Plans are JSON (``{"summary": ..., "steps": [...]}``) found anywhere in a model's
answer; an answer with no JSON is read as a one-step plan, so a planner that
ignores the format still counts (and says so in the arbiter's reasons).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

_WORD = re.compile(r"[a-z0-9_./-]+")


@dataclass(frozen=True, slots=True)
class Plan:
    body: str
    summary: str
    steps: tuple[str, ...]
    structured: bool = True


@dataclass(frozen=True, slots=True)
class Choice:
    """The arbiter's pick: the plan, and the reasons (scores) it is logged with."""

    plan: Plan
    scores: dict[str, float]
    reason: str


@dataclass(frozen=True, slots=True)
class Review:
    ok: bool
    findings: tuple[str, ...] = field(default_factory=tuple)


def planning_prompt(task: str) -> str:
    return (
        "You are one of several planners. Do not change any file and do not run commands "
        "that change anything: only read and think.\n"
        "Return your plan as one JSON object and nothing else: "
        '{"summary": "<one line>", "steps": ["<step 1>", "<step 2>", ...]}\n\n'
        f"Task: {task}"
    )


def plan_text(plan: Plan) -> str:
    """A plan as the context shows it: whose, its summary, its numbered steps."""
    steps = "\n".join(f"{n}. {step}" for n, step in enumerate(plan.steps, 1))
    return f"Chosen plan (from {plan.body}): {plan.summary}\n{steps}".rstrip()


def execution_prompt(task: str, choice: Choice) -> str:
    steps = "\n".join(f"{n}. {step}" for n, step in enumerate(choice.plan.steps, 1))
    return (
        f"{task}\n\n(Chorus: several models planned this task; this plan, from "
        f"{choice.plan.body}, was chosen. Follow it.)\n{choice.plan.summary}\n{steps}"
    )


def review_prompt(task: str, result: str, diff: str) -> str:
    return (
        "Review another model's work on a task. Do not change anything: only read.\n"
        'Answer with one JSON object and nothing else: {"ok": true|false, '
        '"findings": ["<a concrete problem and where>", ...]}\n\n'
        f"Task: {task}\n\nTheir final answer:\n{result}\n\nTheir changes:\n{diff or '(none)'}"
    )


def revision_prompt(findings: tuple[str, ...], reviewer: str) -> str:
    listed = "\n".join(f"- {f}" for f in findings)
    return (
        f"(Chorus: {reviewer} reviewed your work and found these problems. Fix them, then "
        f"say what you changed.)\n{listed}"
    )


def vote_prompt(tool: str, call: str, reason: str, cwd: str | None) -> str:
    return (
        "Another coding agent wants to run a risky tool call. Do not run anything: only "
        "judge it. Answer with one JSON object and nothing else: "
        '{"vote": "allow" | "deny", "reason": "<one line>"}\n\n'
        f"Tool: {tool}\nCall: {call}\nWorking directory: {cwd or '?'}\n"
        f"Why the policy flagged it: {reason}"
    )


def parse_vote(text: str) -> tuple[str, str] | None:
    """(``allow``|``deny``, reason) from a voter's answer, or None if unreadable."""
    data = first_json(text)
    if not isinstance(data, dict) or data.get("vote") not in ("allow", "deny"):
        return None
    return str(data["vote"]), str(data.get("reason") or "")


def first_json(text: str) -> Any:
    """The first JSON object in ``text`` (fenced or bare), or None."""
    decoder = json.JSONDecoder()
    for match in re.finditer(r"\{", text):
        try:
            value, _ = decoder.raw_decode(text[match.start() :])
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return None


def parse_plan(body: str, text: str) -> Plan:
    data = first_json(text)
    steps = data.get("steps") if isinstance(data, dict) else None
    if isinstance(steps, list) and steps:
        summary = str(data.get("summary") or "")
        return Plan(body, summary, tuple(str(s) for s in steps))
    return Plan(body, text.strip()[:200], (text.strip(),), structured=False)


def parse_review(text: str) -> Review:
    data = first_json(text)
    if not isinstance(data, dict):
        return Review(ok=True)  # an unreadable review finds nothing to act on
    findings = tuple(str(f) for f in data.get("findings") or () if str(f).strip())
    return Review(ok=bool(data.get("ok", not findings)) and not findings, findings=findings)


def _words(step: str) -> frozenset[str]:
    return frozenset(_WORD.findall(step.lower()))


def _similarity(a: str, b: str) -> float:
    wa, wb = _words(a), _words(b)
    return len(wa & wb) / len(wa | wb) if wa | wb else 0.0


def _agreement(plan: Plan, others: list[Plan]) -> float:
    """How many of ``plan``'s steps the other plans share (best match per step)."""
    if not others:
        return 0.0
    total = 0.0
    for step in plan.steps:
        total += sum(
            max((_similarity(step, o) for o in other.steps), default=0.0) for other in others
        )
    return round(total / len(others), 3)


def most_in_common(plans: list[Plan]) -> Choice:
    """The rule arbiter: the plan whose steps the others share most; structured
    plans beat unstructured ones; ties go to the earlier planner."""
    if not plans:
        raise ValueError("no plans to choose from")
    scores = {p.body: _agreement(p, [o for o in plans if o is not p]) for p in plans}
    best = max(plans, key=lambda p: (p.structured, scores[p.body], -plans.index(p)))
    reason = (
        f"most steps in common with the other plans ({scores[best.body]} of "
        f"{len(best.steps)} steps matched on average)"
    )
    return Choice(best, scores, reason)
