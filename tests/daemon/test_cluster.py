"""RoutineLead: on one PostgreSQL, only the lock holder runs the routines; the other
node runs its follower chores, and takes over once the holder's connection dies."""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter

import psycopg
import pytest

from chorus.daemon._cluster import RoutineLead
from chorus.store import PostgresStore, Redactor, SqliteStore
from tests._wait import until_async


def _lead(store: PostgresStore | SqliteStore, name: str, seen: Counter[str]) -> RoutineLead:
    async def run() -> None:
        while True:
            seen[f"{name} runs"] += 1
            await asyncio.sleep(0.05)

    async def follow() -> None:
        seen[f"{name} follows"] += 1

    return RoutineLead(store, run, follow=follow, check_s=0.1)


@pytest.mark.postgres
async def test_one_node_runs_the_routines_and_the_other_takes_over(pg_url: str) -> None:
    seen: Counter[str] = Counter()
    a = PostgresStore(pg_url, redactor=Redactor())
    async with a, PostgresStore(pg_url, redactor=Redactor()) as b:
        lead_a, lead_b = _lead(a, "a", seen), _lead(b, "b", seen)
        task_a = asyncio.create_task(lead_a.serve())
        await until_async(lambda: seen["a runs"] > 0)
        task_b = asyncio.create_task(lead_b.serve())
        await until_async(lambda: seen["b follows"] >= 3)
        assert (lead_a.leading, lead_b.leading, seen["b runs"]) == (True, False, 0)

        def cut() -> None:  # the leader's lock connection dies (as with kill -9)
            with psycopg.connect(pg_url, autocommit=True) as conn:
                conn.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                    " WHERE application_name = %s",
                    (f"chorus-lead {a.writer_id}",),
                )

        await asyncio.to_thread(cut)
        await until_async(lambda: lead_b.leading and not lead_a.leading)
        runs_a = seen["a runs"]
        await asyncio.sleep(0.5)
        assert seen["a runs"] == runs_a, "the old leader stopped running the routines"
        assert seen["b runs"] > 0
        for task in (task_a, task_b):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def test_a_store_of_one_daemon_always_runs_the_routines() -> None:
    seen: Counter[str] = Counter()
    async with SqliteStore(redactor=Redactor()) as store:
        lead = _lead(store, "only", seen)
        task = asyncio.create_task(lead.serve())
        await until_async(lambda: seen["only runs"] >= 3)
        assert lead.status() == {"routines_leader": True}
        assert seen["only follows"] == 0
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
