"""The pure parts of the thinking frameworks: prompts, parsing what a model returns,
and the rule-based arbiter. No I/O: the runner feeds these text and gets text.

Plans are JSON (``{"summary": ..., "steps": [...]}``) found anywhere in a model's
answer; an answer with no JSON is read as a plan in free text, passed on once and
as written, so a planner that ignores the format still counts (and says so in the
arbiter's reasons). A review is JSON or it is unreadable: an unreadable review is
never taken for "no findings".

The arbiter's order, stated once (:func:`most_in_common`): structured plans first;
then, with three plans or more, the plan whose steps the others share most (with
two, both plans share the same steps, so agreement cannot tell them apart and is
not used); then the planner that answered fastest; then the order given.
"""

from __future__ import annotations

import dataclasses
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
    #: How long its planner took (seconds), when known: the arbiter's tie-break.
    seconds: float | None = None


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
    #: False when the reviewer's answer held no JSON review (then ``ok`` is False).
    readable: bool = True


def planning_prompt(task: str) -> str:
    return (
        "You are one of several planners. Do not change any file and do not run commands "
        "that change anything: only read and think.\n"
        "Return your plan as one JSON object and nothing else: "
        '{"summary": "<one line>", "steps": ["<step 1>", "<step 2>", ...]}\n\n'
        f"Task: {task}"
    )


def plan_body(plan: Plan) -> str:
    """A plan's own words: its summary and numbered steps, or its free text once."""
    if not plan.structured:
        return "\n".join(plan.steps)
    steps = "\n".join(f"{n}. {step}" for n, step in enumerate(plan.steps, 1))
    return f"{plan.summary}\n{steps}".strip()


def plan_text(plan: Plan) -> str:
    """A plan as the context shows it: whose, then its own words."""
    return f"Chosen plan (from {plan.body}): {plan_body(plan)}"


def execution_prompt(task: str, choice: Choice) -> str:
    return (
        f"{task}\n\n(Chorus: several models planned this task; this plan, from "
        f"{choice.plan.body}, was chosen. Follow it.)\n{plan_body(choice.plan)}"
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
    return Plan(body, "", (text.strip(),), structured=False)


def timed(plan: Plan, seconds: float | None) -> Plan:
    """``plan`` with how long its planner took."""
    return dataclasses.replace(plan, seconds=seconds)


def parse_review(text: str) -> Review:
    data = first_json(text)
    if not isinstance(data, dict):
        return Review(ok=False, readable=False)  # never read as "no findings"
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
    """The rule arbiter, in the module's stated order: structured, then agreement
    (three plans or more), then the fastest planner, then the order given."""
    if not plans:
        raise ValueError("no plans to choose from")
    scores = {p.body: _agreement(p, [o for o in plans if o is not p]) for p in plans}
    weigh = len(plans) >= 3
    ranked = sorted(plans, key=lambda p: _rank(p, scores[p.body] if weigh else 0.0, plans))
    best = ranked[0]
    return Choice(best, scores, _reason(best, ranked, scores, weigh))


def _rank(plan: Plan, score: float, plans: list[Plan]) -> tuple[bool, float, float, int]:
    fastest = plan.seconds if plan.seconds is not None else float("inf")
    return (not plan.structured, -score, fastest, plans.index(plan))


def _reason(best: Plan, ranked: list[Plan], scores: dict[str, float], weigh: bool) -> str:
    """Which rule decided: the first one on which the runner-up differs."""
    if len(ranked) == 1:
        return "the only plan"
    second = ranked[1]
    if best.structured != second.structured:
        return f"the only structured plan ahead of {second.body}'s free text"
    if weigh and scores[best.body] != scores[second.body]:
        return (
            f"most steps in common with the other plans ({scores[best.body]} of "
            f"{len(best.steps)} steps matched on average)"
        )
    if best.seconds is not None and best.seconds != second.seconds:
        return f"the fastest planner ({best.seconds:.1f}s)"
    return "the first planner given (nothing else told the plans apart)"
