"""A job's terminal state and its JobEnded are one transaction; start-up repair fixes
what an older Chorus (two transactions) or a crash before the mirror write left."""

from __future__ import annotations

from pathlib import Path

import pytest

from chorus._errors import EventTooLargeError
from chorus.events import ErrorCode, ErrorInfo, JobEnded, Text, parse_event
from chorus.store import (
    JobState,
    JobStateError,
    SessionRecord,
    SqliteStore,
    repair_store,
)


async def _running_job(store: SqliteStore, session: SessionRecord) -> str:
    job = await store.create_job("do it", session_id=session.id)
    claimed = await store.claim_next_job()
    assert claimed is not None
    assert claimed.id == job.id
    return job.id


async def _ends(store: SqliteStore, session_id: str) -> list[JobEnded]:
    return [e for e in await store.read_events(session_id) if isinstance(e, JobEnded)]


async def test_end_job_writes_the_state_and_the_event_together(
    store: SqliteStore, session: SessionRecord
) -> None:
    job_id = await _running_job(store, session)
    job, ended = await store.end_job(
        job_id, JobState.SUCCEEDED, JobEnded(state="succeeded", result="ok"), result={"text": "ok"}
    )
    assert job.state is JobState.SUCCEEDED
    assert job.result == {"text": "ok"}
    assert job.ended_at is not None
    assert isinstance(ended, JobEnded)
    assert ended.job_id == job_id
    assert ended.seq == 1
    assert await _ends(store, session.id) == [ended]


async def test_an_illegal_end_writes_neither_half(
    store: SqliteStore, session: SessionRecord
) -> None:
    job_id = await _running_job(store, session)
    await store.end_job(job_id, JobState.SUCCEEDED, JobEnded(state="succeeded"))
    with pytest.raises(JobStateError):
        await store.end_job(job_id, JobState.FAILED, JobEnded(state="failed"))
    assert len(await _ends(store, session.id)) == 1
    assert (await store.get_job(job_id)).state is JobState.SUCCEEDED


async def test_an_end_event_too_large_leaves_the_job_running(
    chorus_home: Path, session: SessionRecord
) -> None:
    async with SqliteStore(max_event_bytes=4096) as small:
        await small.create_session("b", session_id="s2")
        job = await small.create_job("x", session_id="s2")
        await small.claim_next_job()
        with pytest.raises(EventTooLargeError):
            await small.end_job(job.id, JobState.SUCCEEDED, JobEnded(state="x", result="y" * 9000))
        assert (await small.get_job(job.id)).state is JobState.RUNNING
        assert await small.read_events("s2") == []


async def test_end_job_refuses_a_non_terminal_state(
    store: SqliteStore, session: SessionRecord
) -> None:
    job_id = await _running_job(store, session)
    with pytest.raises(JobStateError):
        await store.end_job(job_id, JobState.QUEUED, JobEnded(state="queued"))


async def test_repair_appends_the_end_a_two_transaction_crash_lost(
    store: SqliteStore, session: SessionRecord
) -> None:
    failed = await _running_job(store, session)
    error = ErrorInfo(code=ErrorCode.API_ERROR, message="boom")
    # What the old supervisor's first transaction left when killed before the second.
    await store.update_job(failed, state=JobState.FAILED, error=error.model_dump())
    done = await _running_job(store, session)
    await store.end_job(done, JobState.SUCCEEDED, JobEnded(state="succeeded"))
    assert [j.id for j in await store.jobs_missing_end()] == [failed]

    report = await repair_store(store)
    assert report.ended_jobs == [failed]
    ends = {e.job_id: e for e in await _ends(store, session.id)}
    assert ends[failed].state == "failed"
    assert ends[failed].error == error
    assert await store.jobs_missing_end() == []
    assert (await repair_store(store)).ended_jobs == []  # idempotent


async def test_repair_rebuilds_a_mirror_that_lost_its_last_batch(
    sqlite_store: SqliteStore, chorus_home: Path
) -> None:
    # SQLite only: on PostgreSQL each node mirrors what it wrote (stale_mirrors: none).
    store = sqlite_store
    session = await store.create_session("testbody", session_id="s1")
    for n in range(5):
        await store.append(session.id, Text(text=f"line {n}"))
    mirror = chorus_home / "sessions" / f"{session.id}.jsonl"
    lines = mirror.read_text().splitlines()
    mirror.write_text("\n".join(lines[:3]) + "\n")  # the writer died before the last write
    other = await store.create_session("b", session_id="intact")
    await store.append(other.id, Text(text="fine"))
    assert await store.stale_mirrors() == [session.id]

    report = await repair_store(store)
    assert report.rebuilt_mirrors == [session.id]
    seqs = [parse_event(line).seq for line in mirror.read_text().splitlines()]
    assert seqs == [1, 2, 3, 4, 5]
    assert await store.stale_mirrors() == []


async def test_a_torn_last_mirror_line_counts_as_stale(
    sqlite_store: SqliteStore, chorus_home: Path
) -> None:
    # SQLite only: on PostgreSQL each node mirrors what it wrote (stale_mirrors: none).
    store = sqlite_store
    session = await store.create_session("testbody", session_id="s1")
    await store.append(session.id, Text(text="whole"))
    mirror = chorus_home / "sessions" / f"{session.id}.jsonl"
    with mirror.open("a") as file:
        file.write('{"type": "text", "te')
    assert await store.stale_mirrors() == [session.id]
