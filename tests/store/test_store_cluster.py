"""One of everything across the cluster: a leader per role (an advisory lock that
dies with its connection) and provider health shared through the database."""

from __future__ import annotations

import asyncio

import psycopg
import pytest

from chorus.store import PostgresStore, Redactor, SqliteStore, StoreError

pytestmark = pytest.mark.postgres


async def _kill_lead_connection(url: str, store: PostgresStore) -> int:
    """pg_terminate_backend on the store's leader connection; how many were killed."""

    def kill() -> int:
        with psycopg.connect(url, autocommit=True) as conn:
            rows = conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE application_name = %s",
                (f"chorus-lead {store.writer_id}",),
            ).fetchall()
        return len(rows)

    return await asyncio.to_thread(kill)


async def _eventually_leads(store: PostgresStore, role: str) -> bool:
    """The server releases a lock when the backend exits, a moment after the cut."""
    for _ in range(50):
        if await store.try_lead(role):
            return True
        await asyncio.sleep(0.1)
    return False


async def test_one_leader_and_the_other_takes_over_when_its_connection_dies(pg_url: str) -> None:
    async with (
        PostgresStore(pg_url, redactor=Redactor()) as a,
        PostgresStore(pg_url, redactor=Redactor()) as b,
    ):
        assert await a.try_lead("routines") is True
        assert await b.try_lead("routines") is False
        assert await a.try_lead("routines") is True  # held, and still alive
        assert await b.try_lead("other role") is True  # roles are independent
        assert await _kill_lead_connection(pg_url, a) == 1
        assert await _eventually_leads(b, "routines")
        assert await a.try_lead("routines") is False  # it notices it lost the lead
        assert await a.try_lead("routines") is False  # and reconnects, as a follower


async def test_closing_the_leader_hands_the_lead_over(pg_url: str) -> None:
    async with PostgresStore(pg_url, redactor=Redactor()) as b:
        async with PostgresStore(pg_url, redactor=Redactor()) as a:
            assert await a.try_lead("routines")
            assert not await b.try_lead("routines")
        assert await _eventually_leads(b, "routines")


async def test_provider_health_one_node_writes_is_what_another_reads(pg_url: str) -> None:
    row = {"key": "claude@default", "cooldown_until": 1e12, "quota_state": "exhausted"}
    async with (
        PostgresStore(pg_url, redactor=Redactor()) as a,
        PostgresStore(pg_url, redactor=Redactor()) as b,
    ):
        assert await b.list_provider_health() == []
        await a.put_provider_health("claude@default", row, node="node-a")
        assert await b.list_provider_health() == [row]
        await b.put_provider_health("claude@default", {**row, "quota_state": "ok"}, node="b")
        assert [r["quota_state"] for r in await a.list_provider_health()] == ["ok"]


@pytest.mark.usefixtures("chorus_home")
async def test_a_store_of_one_daemon_always_leads_and_shares_no_health() -> None:
    async with SqliteStore(redactor=Redactor()) as store:
        assert await store.try_lead("routines") is True
        assert await store.list_provider_health() == []
        with pytest.raises(StoreError):
            await store.put_provider_health("k", {}, node="n")
