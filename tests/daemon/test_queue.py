"""The job queue of one node: ordering per session, pausing, the parallel limit."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from chorus.daemon._queue import JobQueue
from chorus.store import JobRecord, JobState, Redactor, SessionRecord, SqliteStore, WorkerNode


@pytest.fixture
async def store(chorus_home: Path) -> AsyncIterator[SqliteStore]:
    async with SqliteStore(redactor=Redactor()) as store:
        yield store


class Limit:
    """The parallel limit, as the config says it now (a reload may change it)."""

    def __init__(self, value: int) -> None:
        self.value = value

    def __call__(self) -> int:
        return self.value


def queue_of(store: SqliteStore, limit: Limit) -> JobQueue:
    return JobQueue(store, WorkerNode(store, bodies=["claude"]), limit)


async def session(store: SqliteStore, tmp_path: Path) -> SessionRecord:
    return await store.create_session("claude", cwd=str(tmp_path))


async def add(queue: JobQueue, on: SessionRecord, prompt: str, **options: object) -> JobRecord:
    return await queue.add(prompt, on, dict(options))


async def claim(queue: JobQueue) -> str | None:
    async with queue.lock:
        job = await queue.claim()
    return None if job is None else job.prompt


async def end(store: SqliteStore, queue: JobQueue, job: JobRecord) -> None:
    """The job ended here (the store says so first, then the queue frees its session)."""
    await store.update_job(job.id, state=JobState.SUCCEEDED)
    queue.release(job.session_id)


async def test_a_sessions_jobs_run_one_at_a_time_in_order(
    store: SqliteStore, tmp_path: Path
) -> None:
    queue = queue_of(store, Limit(4))
    a, b = await session(store, tmp_path), await session(store, tmp_path)
    a1 = await add(queue, a, "a1")
    await add(queue, a, "a2")
    await add(queue, b, "b1")
    assert [await claim(queue), await claim(queue)] == ["a1", "b1"]
    assert await claim(queue) is None  # a2 waits behind a1
    assert queue.is_busy(a.id)
    assert queue.busy() == sorted([a.id, b.id])
    await end(store, queue, a1)
    assert not queue.is_busy(a.id)
    assert await claim(queue) == "a2"


async def test_a_paused_session_runs_nothing_until_resumed(
    store: SqliteStore, tmp_path: Path
) -> None:
    queue = queue_of(store, Limit(4))
    a = await session(store, tmp_path)
    await add(queue, a, "a1")
    assert queue.pause(a.id) is True  # nothing runs: its body may close now
    assert queue.paused() == [a.id]
    assert await claim(queue) is None
    queue.resume(a.id)
    assert not queue.is_paused(a.id)
    assert await claim(queue) == "a1"
    assert queue.pause(a.id) is False  # a1 runs: the body closes once it ends


async def test_past_the_limit_only_system_jobs_are_claimed(
    store: SqliteStore, tmp_path: Path
) -> None:
    limit = Limit(1)
    queue = queue_of(store, limit)
    a, b, c = [await session(store, tmp_path) for _ in range(3)]
    await add(queue, a, "first")
    await add(queue, b, "second")
    await add(queue, c, "a framework's child", system=True)
    assert await claim(queue) == "first"
    assert await claim(queue) == "a framework's child"  # its parent holds the slot
    assert await claim(queue) is None
    limit.value = 3  # a reload raised it
    assert await claim(queue) == "second"


async def test_a_follow_up_queues_on_the_same_session_and_body(
    store: SqliteStore, tmp_path: Path
) -> None:
    queue = queue_of(store, Limit(2))
    a = await session(store, tmp_path)
    first = await add(queue, a, "first")
    follow = await queue.follow_up(first, "and then", {"steer_of": first.id})
    assert (follow.session_id, follow.body) == (a.id, "claude")
    assert follow.options["steer_of"] == first.id
    assert await claim(queue) == "first"
    assert await claim(queue) is None
    await end(store, queue, first)
    assert await claim(queue) == "and then"


async def test_wait_returns_when_woken_or_after_its_time(store: SqliteStore) -> None:
    queue = queue_of(store, Limit(1))
    started = time.monotonic()
    await queue.wait(0.2)
    assert time.monotonic() - started >= 0.2
    waiting = asyncio.create_task(queue.wait(30))
    await asyncio.sleep(0.05)
    queue.wake()
    await asyncio.wait_for(waiting, 2)
