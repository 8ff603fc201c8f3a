"""Jobs: the durable queue the daemon's supervisor claims work from."""

from __future__ import annotations

import asyncio

import pytest

from chorus.store import (
    JOB_TRANSITIONS,
    DuplicateRecordError,
    JobState,
    JobStateError,
    SessionRecord,
    Store,
    UnknownJobError,
    UnknownSessionError,
)


async def test_created_job_is_queued(store: Store) -> None:
    job = await store.create_job("fix the bug", body="claude", options={"model": "opus"})
    assert (job.state, job.attempts, job.body, job.options) == (
        JobState.QUEUED,
        0,
        "claude",
        {"model": "opus"},
    )
    assert (job.started_at, job.ended_at, job.result, job.error) == (None, None, None, None)
    assert await store.get_job(job.id) == job


async def test_claim_takes_the_oldest_queued_job(store: Store) -> None:
    first = await store.create_job("one")
    second = await store.create_job("two")
    claimed = await store.claim_next_job()
    assert claimed is not None
    assert (claimed.id, claimed.state, claimed.attempts) == (first.id, JobState.RUNNING, 1)
    assert claimed.started_at is not None
    again = await store.claim_next_job()
    assert again is not None
    assert again.id == second.id
    assert await store.claim_next_job() is None


async def test_concurrent_claims_never_share_a_job(store: Store) -> None:
    jobs = [await store.create_job(f"job {i}") for i in range(5)]
    claims = await asyncio.gather(*(store.claim_next_job() for _ in range(10)))
    taken = [c.id for c in claims if c is not None]
    assert sorted(taken) == sorted(j.id for j in jobs)
    assert claims.count(None) == 5


async def test_finishing_a_job_records_result_and_end(store: Store) -> None:
    job = await store.create_job("x")
    await store.claim_next_job()
    done = await store.update_job(job.id, state=JobState.SUCCEEDED, result={"text": "done"})
    assert (done.state, done.result) == (JobState.SUCCEEDED, {"text": "done"})
    assert done.ended_at is not None
    with pytest.raises(JobStateError) as caught:
        await store.update_job(job.id, state=JobState.RUNNING)
    assert (caught.value.current, caught.value.wanted) == ("succeeded", "running")


async def test_retry_requeues_and_clears_the_outcome(store: Store) -> None:
    job = await store.create_job("x")
    await store.claim_next_job()
    failed = await store.update_job(job.id, state=JobState.FAILED, error={"code": "rate_limited"})
    assert failed.error == {"code": "rate_limited"}
    requeued = await store.update_job(job.id, state=JobState.QUEUED)
    assert (requeued.state, requeued.error, requeued.ended_at) == (JobState.QUEUED, None, None)
    reclaimed = await store.claim_next_job()
    assert reclaimed is not None
    assert reclaimed.attempts == 2


async def test_requeue_running_jobs_after_a_restart(store: Store) -> None:
    running = await store.create_job("was running")
    queued = await store.create_job("still queued")
    await store.claim_next_job()
    requeued = await store.requeue_running_jobs()
    assert [j.id for j in requeued] == [running.id]
    states = {j.id: j.state for j in await store.list_jobs()}
    assert states == {running.id: JobState.QUEUED, queued.id: JobState.QUEUED}


async def test_update_fields_without_a_state_change(store: Store, session: SessionRecord) -> None:
    job = await store.create_job("x")
    routed = await store.update_job(job.id, body="codex", session_id=session.id)
    assert (routed.state, routed.body, routed.session_id) == (JobState.QUEUED, "codex", session.id)
    assert [j.id for j in await store.list_jobs(session_id=session.id)] == [job.id]
    assert await store.list_jobs(state=JobState.RUNNING) == []


async def test_job_errors(store: Store) -> None:
    await store.create_job("x", job_id="j1")
    with pytest.raises(DuplicateRecordError):
        await store.create_job("y", job_id="j1")
    with pytest.raises(UnknownJobError):
        await store.get_job("nope")
    with pytest.raises(UnknownJobError):
        await store.update_job("nope", state=JobState.CANCELLED)
    with pytest.raises(UnknownSessionError):
        await store.create_job("z", session_id="nope")
    with pytest.raises(UnknownSessionError):
        await store.update_job("j1", session_id="nope")
    with pytest.raises(JobStateError):
        await store.update_job("j1", state=JobState.SUCCEEDED)  # never ran


async def test_a_failed_update_changes_nothing(store: Store) -> None:
    job = await store.create_job("x")
    with pytest.raises(UnknownSessionError):
        await store.update_job(job.id, state=JobState.CANCELLED, session_id="nope")
    assert (await store.get_job(job.id)).state is JobState.QUEUED


def test_terminal_states_have_no_way_out_but_failed_retry() -> None:
    assert JOB_TRANSITIONS[JobState.SUCCEEDED] == frozenset()
    assert JOB_TRANSITIONS[JobState.CANCELLED] == frozenset()
    assert JOB_TRANSITIONS[JobState.FAILED] == frozenset({JobState.QUEUED})
