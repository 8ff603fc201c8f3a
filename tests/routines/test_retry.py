"""The retry queue on a clock the test sets: backoff, max_retries, what is retried,
and pending retries surviving a restart."""

from __future__ import annotations

from typing import TYPE_CHECKING

from chorus.config import RetryConfig
from chorus.daemon import JobRequest
from chorus.events import ErrorCode, ErrorInfo, JobEnded
from chorus.routines._retry import RetryQueue, backoff_s, is_retryable
from chorus.store import JobRecord, JobState

if TYPE_CHECKING:
    from conftest import Rig


async def _failed_job(rig: Rig, code: ErrorCode, *, claims: int = 1) -> tuple[JobRecord, JobEnded]:
    job = await rig.sup.submit(JobRequest(prompt="work", body="claude"))
    error = ErrorInfo(code=code, message=str(code))
    for i in range(claims):
        await rig.store.update_job(job.id, state=JobState.RUNNING)
        await rig.store.update_job(job.id, state=JobState.FAILED, error=error.model_dump())
        if i < claims - 1:
            await rig.store.update_job(job.id, state=JobState.QUEUED)
    fresh = await rig.store.get_job(job.id)
    return fresh, JobEnded(state="failed", error=error, attempts=fresh.attempts)


def test_backoff_doubles_up_to_the_cap() -> None:
    config = RetryConfig(base_s=30, max_s=100)
    assert [backoff_s(n, config) for n in (1, 2, 3, 4)] == [30, 60, 100, 100]


def test_only_quota_and_transient_errors_are_retried() -> None:
    def info(code: ErrorCode, retryable: bool = False) -> ErrorInfo:
        return ErrorInfo(code=code, message="m", retryable=retryable)

    assert is_retryable(info(ErrorCode.QUOTA_EXHAUSTED))
    assert is_retryable(info(ErrorCode.OVERLOADED))
    assert is_retryable(info(ErrorCode.API_ERROR, retryable=True))
    assert not is_retryable(info(ErrorCode.AUTH))
    assert not is_retryable(info(ErrorCode.POLICY_DENIED))
    assert not is_retryable(info(ErrorCode.INTERRUPTED, retryable=True))


async def test_a_transient_failure_is_queued_again_after_the_backoff(rig: Rig) -> None:
    rig.clock.now = 1000.0
    queue = rig.sched.retries
    job, ended = await _failed_job(rig, ErrorCode.OVERLOADED)
    await queue.on_outcome(job, ended)
    assert queue.status() == {"pending_retries": 1}
    assert rig.sup.status()["pending_retries"] == 1
    rig.clock.now = 1000.0 + 29
    await queue.tick()
    assert (await rig.store.get_job(job.id)).state == JobState.FAILED
    rig.clock.now = 1000.0 + 30
    await queue.tick()
    assert (await rig.store.get_job(job.id)).state == JobState.QUEUED
    assert queue.status() == {"pending_retries": 0}


async def test_no_retry_past_max_retries_or_for_a_permanent_error(rig: Rig) -> None:
    queue = rig.sched.retries
    spent, ended = await _failed_job(rig, ErrorCode.SERVER_ERROR, claims=4)  # 1 + 3 retries
    await queue.on_outcome(spent, ended)
    denied, ended = await _failed_job(rig, ErrorCode.AUTH)
    await queue.on_outcome(denied, ended)
    assert queue.pending == {}


async def test_pending_retries_survive_a_restart(rig: Rig) -> None:
    rig.clock.now = 5000.0
    job, ended = await _failed_job(rig, ErrorCode.NETWORK, claims=2)
    await rig.sched.retries.on_outcome(job, ended)
    again = RetryQueue(rig.sup, clock=rig.clock)
    (pending,) = again.pending.values()
    assert (pending.job_id, pending.retry, pending.due_at) == (job.id, 2, 5060.0)


async def test_a_quota_failure_waits_at_least_for_the_earliest_provider_reset(rig: Rig) -> None:
    rig.clock.now = 10_000.0
    quota = ErrorInfo(code=ErrorCode.QUOTA_EXHAUSTED, message="out", retry_after_s=7200)
    for body in rig.sup.router.bodies:  # every provider is cooling down for two hours
        rig.sup.health.failure(rig.sup.provider_key(body), quota, rig.clock.now)
    reset = rig.sup.health.earliest_reset([rig.sup.provider_key(b) for b in rig.sup.router.bodies])
    assert reset > rig.clock.now + 30
    job, ended = await _failed_job(rig, ErrorCode.QUOTA_EXHAUSTED)
    await rig.sched.retries.on_outcome(job, ended)
    (pending,) = rig.sched.retries.pending.values()
    assert pending.due_at >= reset
