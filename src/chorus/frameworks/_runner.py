"""Running a job under a thinking framework, over a port the supervisor provides.

``direct`` is the supervisor's own path. The others are built from two moves the
:class:`Port` offers: a *turn* on the job's own session (with the supervisor's
restarts, retries and failover) and a *child* job (its own session and body, in
the log, linked to the parent, under the same policy and failover). A child that
fails never sinks the others: it is noted and left out.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from chorus.events import ErrorCode, ErrorInfo, Event, TurnCompleted, TurnFailed
from chorus.frameworks._plans import (
    Plan,
    Review,
    execution_prompt,
    first_json,
    most_in_common,
    parse_plan,
    parse_review,
    plan_text,
    planning_prompt,
    review_prompt,
    revision_prompt,
    timed,
)
from chorus.store import JobRecord, JobState

FrameworkName = Literal["direct", "consensus", "reflect", "sequential", "script", "auto"]
FRAMEWORKS: tuple[str, ...] = ("direct", "consensus", "reflect", "sequential", "script", "auto")


class Port(Protocol):
    """What a framework may do with the job it runs (the supervisor implements it)."""

    async def turn(self, job: JobRecord, prompt: str, plan: str | None = None) -> Event: ...

    async def child(self, job: JobRecord, prompt: str, body: str, mode: str) -> JobRecord: ...

    async def note(self, job: JobRecord, message: str, kind: str) -> None: ...

    def healthy(self, bodies: Sequence[str]) -> list[str]: ...

    async def changes(self, job: JobRecord) -> str: ...

    async def cost(self, record: JobRecord) -> float | None: ...


@dataclass(frozen=True, slots=True)
class Settings:
    planners: tuple[str, ...]
    reviewer: str | None = None
    rounds: int = 1
    steps: int = 4


def _result(record: JobRecord) -> str | None:
    if record.state != JobState.SUCCEEDED or not isinstance(record.result, dict):
        return None
    text = record.result.get("text")
    return text if isinstance(text, str) else None


def _elapsed(record: JobRecord) -> float | None:
    if record.started_at and record.ended_at:
        return float(record.ended_at - record.started_at)
    return None


def _seconds(record: JobRecord) -> str:
    elapsed = _elapsed(record)
    return "?" if elapsed is None else f"{elapsed:.1f}s"


def _failed(message: str) -> TurnFailed:
    return TurnFailed(error=ErrorInfo(code=ErrorCode.UNKNOWN, message=message))


async def consensus(port: Port, job: JobRecord, settings: Settings) -> Event:
    """Plan in parallel on every healthy planner (read-only), pick one plan by the
    rule arbiter, and execute it on the job's own body."""
    planners = port.healthy(settings.planners)
    if not planners:
        return _failed(
            f"consensus: none of the planners is healthy ({', '.join(settings.planners)})"
        )
    if len(planners) < len(settings.planners):
        skipped = ", ".join(b for b in settings.planners if b not in planners)
        await port.note(
            job, f"consensus: {skipped} not healthy; planning with the rest", "framework"
        )
    plans = await _plans(port, job, planners)
    if not plans:
        return _failed("consensus: every planner failed")
    choice = most_in_common(plans)
    scores = ", ".join(f"{body} {score}" for body, score in choice.scores.items())
    message = f"arbiter chose {choice.plan.body}'s plan: {choice.reason}; scores: {scores}"
    await port.note(job, message, "arbiter")
    plan = plan_text(choice.plan)  # also the plan in the context of a body it starts
    return await port.turn(job, execution_prompt(job.prompt, choice), plan)


async def _plans(port: Port, job: JobRecord, planners: list[str]) -> list[Plan]:
    prompt = planning_prompt(job.prompt)
    runs = [port.child(job, prompt, body, "plan") for body in planners]
    records = await asyncio.gather(*runs, return_exceptions=True)
    plans = []
    for body, record in zip(planners, records, strict=True):
        text = None if isinstance(record, BaseException) else _result(record)
        if text is None:
            await port.note(job, f"planner {body} failed: {_why(record)}", "framework")
            continue
        assert isinstance(record, JobRecord)
        plans.append(timed(parse_plan(body, text), _elapsed(record)))
        spent = await port.cost(record)
        usd = f", ${spent:.4f}" if spent is not None else ""
        note = f"planner {body} (job {record.id}, {_seconds(record)}{usd}) done"
        await port.note(job, note, "framework")
    return plans


def _why(record: JobRecord | BaseException) -> str:
    if isinstance(record, BaseException):
        return repr(record)
    return f"job {record.id} {record.state}: {(record.error or {}).get('message', '')}"


async def reflect(port: Port, job: JobRecord, settings: Settings) -> Event:
    """The job's body works; a reviewer from another vendor reviews it read-only; the
    body revises with the findings; at most ``rounds`` reviews."""
    final = await port.turn(job, job.prompt)
    reviewer = settings.reviewer
    for number in range(1, settings.rounds + 1):
        if not isinstance(final, TurnCompleted) or reviewer is None:
            return final
        review = await _review(port, job, reviewer, final.result or "", number)
        if review is not None and not review.readable:
            return _failed(
                f"reflect: review {number} by {reviewer} could not be read (no JSON review "
                "in its answer; its text is in the job's notes); the work is unreviewed"
            )
        if review is None or review.ok:
            return final
        final = await port.turn(job, revision_prompt(review.findings, reviewer))
    return final


async def _review(
    port: Port, job: JobRecord, reviewer: str, result: str, number: int
) -> Review | None:
    prompt = review_prompt(job.prompt, result, await port.changes(job))
    record = await port.child(job, prompt, reviewer, "plan")
    text = _result(record)
    if text is None:
        await port.note(job, f"review {number} by {reviewer} failed: {_why(record)}", "framework")
        return None
    review = parse_review(text)
    if not review.readable:
        await port.note(
            job,
            f"review {number} by {reviewer} (job {record.id}) is not a "
            f"JSON review; its text: {text}",
            "review",
        )
        return review
    found = "; ".join(review.findings) or "no findings"
    await port.note(job, f"review {number} by {reviewer} (job {record.id}): {found}", "review")
    return review


async def sequential(port: Port, job: JobRecord, settings: Settings) -> Event:
    """Hypothesis, test, observe: each step a turn, until the model says confirmed."""
    final = await port.turn(job, _hypothesis_prompt(job.prompt))
    for _ in range(settings.steps - 1):
        if not isinstance(final, TurnCompleted) or _confirmed(final.result or ""):
            return final
        final = await port.turn(job, _NEXT_STEP)
    return final


_NEXT_STEP = (
    "(Chorus: next step.) Revise the hypothesis from what you observed, run one test, "
    'and end with the same JSON line {"hypothesis": ..., "confirmed": true|false}.'
)


def _hypothesis_prompt(task: str) -> str:
    return (
        f"{task}\n\n(Chorus: diagnose step by step. State one hypothesis, run one test that "
        "could refute it, report what you observed, and end with one JSON line "
        '{"hypothesis": "...", "confirmed": true|false}.)'
    )


def _confirmed(text: str) -> bool:
    data = first_json(text)
    return isinstance(data, dict) and data.get("confirmed") is True


async def script(port: Port, job: JobRecord, settings: Settings) -> Event:
    """The body writes a throwaway script in a scratch folder, runs it, and answers
    from its output."""
    prompt = (
        f"{job.prompt}\n\n(Chorus: answer by writing a small throwaway script in a new "
        "folder named .chorus-scratch, running it, and answering from its output. "
        "Quote the output you relied on.)"
    )
    return await port.turn(job, prompt)
