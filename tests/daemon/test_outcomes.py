"""Typed job outcomes, delivered to subscribers by type."""

from __future__ import annotations

import time

from chorus.daemon._outcomes import (
    JobCancelled,
    JobEnd,
    JobFailed,
    JobFailedOver,
    JobStarted,
    JobSucceeded,
    Outcome,
    Outcomes,
    job_end,
)
from chorus.events import ErrorCode, ErrorInfo, Handoff, JobEnded
from chorus.store import JobRecord, JobState


def job() -> JobRecord:
    now = time.time()
    return JobRecord(id="j1", prompt="p", state=JobState.SUCCEEDED, created_at=now, updated_at=now)


def test_the_end_state_picks_the_outcome_class() -> None:
    made = {s: job_end(job(), JobEnded(state=s), "codex") for s in ("succeeded", "failed")}
    assert isinstance(made["succeeded"], JobSucceeded)
    assert isinstance(made["failed"], JobFailed)
    cancelled = job_end(job(), JobEnded(state="cancelled"), None)
    assert isinstance(cancelled, JobCancelled)
    assert isinstance(cancelled, JobEnd)
    moved = job_end(job(), JobEnded(state="succeeded"), "codex", ("claude",))
    assert (moved.body, moved.failed_over_from) == ("codex", ("claude",))


async def test_subscribers_get_the_outcomes_of_their_type_in_order() -> None:
    outcomes = Outcomes()
    seen: list[tuple[str, Outcome]] = []

    async def ends(o: JobEnd) -> None:
        seen.append(("end", o))

    async def moves(o: JobFailedOver) -> None:
        seen.append(("failover", o))

    async def everything(o: JobStarted) -> None:
        seen.append(("started", o))

    outcomes.on_end(ends)
    outcomes.on_failover(moves)
    outcomes.subscribe(JobStarted, everything)
    started = JobStarted(job())
    error = ErrorInfo(code=ErrorCode.QUOTA_EXHAUSTED, message="out")
    moved = JobFailedOver(job(), Handoff(from_body="claude", to_body="codex", reason=error))
    ended = job_end(job(), JobEnded(state="succeeded"), "codex")
    for outcome in (started, moved, ended):
        await outcomes.publish(outcome)
    assert seen == [("started", started), ("failover", moved), ("end", ended)]


async def test_a_failing_subscriber_does_not_stop_the_others() -> None:
    outcomes = Outcomes()
    got: list[JobEnd] = []

    async def broken(o: JobEnd) -> None:
        raise RuntimeError("a subscriber's bug")

    async def fine(o: JobEnd) -> None:
        got.append(o)

    outcomes.on_end(broken)
    outcomes.on_end(fine)
    ended = job_end(job(), JobEnded(state="failed"), "claude")
    await outcomes.publish(ended)
    assert got == [ended]
