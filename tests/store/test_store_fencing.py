"""Fencing: a job's end carries the lease of the claim that ran it, and one statement
changes the job only while that lease holds (same node, same claim). A node whose
lease lapsed can never end a job another claim now runs. Runs on both backends."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from chorus.events import JobEnded
from chorus.store import (
    JobRecord,
    JobState,
    Lease,
    LeaseLostError,
    Redactor,
    SessionRecord,
    SqliteStore,
    Store,
    UnknownJobError,
)


async def _ends(store: Store, session_id: str) -> list[JobEnded]:
    return [e for e in await store.read_events(session_id) if isinstance(e, JobEnded)]


async def _claim(store: Store, node: str, lease_s: float = 30.0) -> JobRecord:
    claimed = await store.claim_job(node, lease_s=lease_s)
    assert claimed is not None
    return claimed


def _ended(state: str = "succeeded") -> JobEnded:
    return JobEnded(state=state, result="done")


async def test_a_lapsed_lease_cannot_end_the_job_another_node_now_runs(
    store: Store, session: SessionRecord
) -> None:
    job = await store.create_job("x", session_id=session.id)
    first = await _claim(store, "n1", lease_s=0.2)
    assert first.lease == Lease("n1", 1)
    await asyncio.sleep(0.5)  # n1 stops renewing: its lease expires (database clock)
    assert [j.id for j in await store.requeue_expired_jobs()] == [job.id]
    second = await _claim(store, "n2")
    assert second.lease == Lease("n2", 2)

    with pytest.raises(LeaseLostError) as caught:
        await store.end_job(job.id, JobState.SUCCEEDED, _ended(), lease=first.lease)
    assert (caught.value.node, caught.value.token) == ("n1", 1)
    now = await store.get_job(job.id)
    assert (now.state, now.node, now.attempts) == (JobState.RUNNING, "n2", 2)
    assert await _ends(store, session.id) == []  # nothing of the end was written

    done, ended = await store.end_job(job.id, JobState.FAILED, _ended("failed"), lease=second.lease)
    assert (done.state, done.node, done.lease, ended.job_id) == (
        JobState.FAILED,
        "n2",
        None,
        job.id,
    )
    assert [e.state for e in await _ends(store, session.id)] == ["failed"]


async def test_an_older_claim_of_the_same_node_is_stale(
    store: Store, session: SessionRecord
) -> None:
    job = await store.create_job("x", session_id=session.id)
    old = (await _claim(store, "n1")).lease
    await store.requeue_running_jobs(node="n1")  # e.g. the node restarted
    new = (await _claim(store, "n1")).lease
    assert (old, new) == (Lease("n1", 1), Lease("n1", 2))
    with pytest.raises(LeaseLostError):
        await store.end_job(job.id, JobState.SUCCEEDED, _ended(), lease=old)
    assert (await store.get_job(job.id)).state is JobState.RUNNING
    # CONTROL: the same stale end without its lease is not fenced, and wins.
    unfenced, _ = await store.end_job(job.id, JobState.SUCCEEDED, _ended())
    assert unfenced.state is JobState.SUCCEEDED


async def test_a_fenced_end_of_a_queued_or_missing_job_changes_nothing(
    store: Store, session: SessionRecord
) -> None:
    job = await store.create_job("x", session_id=session.id)
    lease = (await _claim(store, "n1")).lease
    assert lease is not None
    await store.requeue_running_jobs()
    with pytest.raises(LeaseLostError):
        await store.end_job(job.id, JobState.CANCELLED, _ended("cancelled"), lease=lease)
    assert (await store.get_job(job.id)).state is JobState.QUEUED
    with pytest.raises(UnknownJobError):
        await store.end_job("no-such-job", JobState.SUCCEEDED, _ended(), lease=lease)
    assert await _ends(store, session.id) == []


async def test_the_fenced_end_is_one_statement_carrying_the_token(chorus_home: Path) -> None:
    statements: list[str] = []

    def trace(sql: str) -> None:
        if sql.startswith("UPDATE jobs"):
            statements.append(sql)

    async with SqliteStore(redactor=Redactor(), sql_trace=trace) as store:
        session = await store.create_session("b")
        job = await store.create_job("x", session_id=session.id)
        lease = (await _claim(store, "n1")).lease
        statements.clear()
        await store.end_job(job.id, JobState.SUCCEEDED, _ended(), lease=lease)
    assert len(statements) == 1, statements  # no read-then-write window
    (update,) = statements
    assert update.startswith("UPDATE jobs SET state = 'succeeded'")
    assert f"WHERE id = '{job.id}' AND state = 'running' AND node = 'n1' AND attempts = 1" in (
        update
    )
