"""PostgreSQL specifics: start-up errors, several processes on one database
(gap-free seqs, tailers that never skip, exactly-once claims, cross-process live
events), the LISTEN connection's recovery, and redaction on the server's disk."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import psycopg
import pytest

from chorus._errors import ConfigError, UserError
from chorus.config import load_config
from chorus.events import Text
from chorus.store import (
    DatabaseDownError,
    PostgresStore,
    Redactor,
    SchemaVersionError,
    SqliteStore,
    StoreUnreachableError,
    open_store,
    redact_url,
)
from chorus.store._pg_migrations import LATEST_VERSION as PG_LATEST
from chorus.testing import PostgresCluster, free_port

pytestmark = pytest.mark.postgres

WORKER = Path(__file__).parent / "scripts" / "pg_worker.py"


async def run_workers(*argvs: list[str]) -> list[list[str]]:
    """Run pg_worker.py processes at once; return each one's stdout lines."""
    procs = [
        await asyncio.create_subprocess_exec(
            sys.executable, str(WORKER), *argv, stdout=asyncio.subprocess.PIPE
        )
        for argv in argvs
    ]
    outputs = await asyncio.gather(*(p.communicate() for p in procs))
    assert [p.returncode for p in procs] == [0] * len(procs)
    return [out.decode().split() for out, _ in outputs]


# -- start-up ------------------------------------------------------------------------------


async def test_an_unreachable_database_names_the_url_without_its_password() -> None:
    port = free_port()  # nobody listens there
    url = f"postgresql://alice:hunter2-very-secret@127.0.0.1:{port}/chorus"
    store = PostgresStore(url, redactor=Redactor())
    with pytest.raises(StoreUnreachableError) as caught:
        await store.start()
    message = str(caught.value)
    assert "hunter2-very-secret" not in message
    assert f"postgresql://alice:***@127.0.0.1:{port}/chorus" in message
    assert "[store] url" in message
    assert isinstance(caught.value, UserError)
    assert caught.value.exit_code == 2


def test_redact_url_keeps_everything_but_the_password() -> None:
    assert redact_url("postgresql://u:p%40ss@h:5432/db?x=1") == "postgresql://u:***@h:5432/db?x=1"
    assert redact_url("postgresql://u@h/db") == "postgresql://u@h/db"


def test_the_store_section_picks_the_backend(chorus_home: Path) -> None:
    chorus_home.mkdir(parents=True)
    config = chorus_home / "config.toml"
    assert isinstance(open_store(load_config(config)), SqliteStore)
    config.write_text('[store]\nurl = "postgresql://chorus@db.example/chorus"\n')
    picked = open_store(load_config(config))
    assert isinstance(picked, PostgresStore)
    assert picked.url == "postgresql://chorus@db.example/chorus"
    config.write_text('[store]\nurl = "mysql://root:pw@db/chorus"\n')
    with pytest.raises(ConfigError) as caught:
        load_config(config)
    assert "unsupported store 'mysql'" in str(caught.value)
    assert "pw" not in str(caught.value).replace("postgresql", "")


async def test_a_newer_schema_is_refused(pg_url: str) -> None:
    async with PostgresStore(pg_url, redactor=Redactor()):
        pass
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("INSERT INTO schema_version VALUES (99, 'future', 0)")
    with pytest.raises(SchemaVersionError):
        await PostgresStore(pg_url, redactor=Redactor()).start()


async def test_daemons_starting_together_migrate_once(pg_url: str) -> None:
    stores = [PostgresStore(pg_url, redactor=Redactor()) for _ in range(4)]
    await asyncio.gather(*(s.start() for s in stores))
    for store in stores:
        await store.close()
    with psycopg.connect(pg_url) as conn:
        versions = conn.execute("SELECT version FROM schema_version ORDER BY version").fetchall()
    assert [v for (v,) in versions] == list(range(1, PG_LATEST + 1))


# -- several processes on one database ----------------------------------------------------


async def test_appends_from_three_processes_are_gap_free_and_tailed_without_a_skip(
    pg_url: str,
) -> None:
    count = 400
    async with PostgresStore(pg_url, redactor=Redactor()) as store:
        await store.create_session("b", session_id="shared")
        tail = await store.subscribe("shared", from_seq=1)
        live = await store.subscribe(None)  # every session, live: fed through LISTEN

        async def follow() -> list[int]:
            seqs = []
            async for event in tail:
                seqs.append(event.seq)
                if event.seq == 3 * count:
                    return seqs
            return seqs

        follower = asyncio.create_task(follow())
        await run_workers(*(["append", pg_url, "shared", str(count), f"w{i}"] for i in range(3)))
        seqs = await asyncio.wait_for(follower, 30)
        live_seqs = []
        while len(live_seqs) < 3 * count:
            live_seqs.append((await asyncio.wait_for(anext(live), 10)).seq)
        logged = await store.read_events("shared")
        await tail.aclose()
        await live.aclose()
        assert await store.integrity_check() == ["ok"]
    assert seqs == list(range(1, 3 * count + 1))  # in order, no gap, no duplicate
    assert sorted(live_seqs) == list(range(1, 3 * count + 1))
    assert [e.seq for e in logged] == list(range(1, 3 * count + 1))
    per_writer = {f"w{i}": [] for i in range(3)}
    for event in logged:
        assert isinstance(event, Text)
        tag, n = event.text.split("-")
        per_writer[tag].append(int(n))
    assert per_writer == {tag: list(range(count)) for tag in per_writer}  # each in call order


async def test_three_processes_claim_each_job_exactly_once(pg_url: str) -> None:
    async with PostgresStore(pg_url, redactor=Redactor()) as store:
        jobs = {(await store.create_job(f"job {i}")).id for i in range(300)}
    outputs = await run_workers(*(["claim", pg_url, f"node{i}"] for i in range(3)))
    claimed = [job for lines in outputs for job in lines if job != "done"]
    assert len(claimed) == len(jobs)
    assert set(claimed) == jobs
    assert all(len(lines) > 1 for lines in outputs), "every worker should have claimed some"


async def test_two_stores_appending_to_two_sessions_in_opposite_orders_do_not_deadlock(
    pg_url: str,
) -> None:
    async with (
        PostgresStore(pg_url, redactor=Redactor()) as one,
        PostgresStore(pg_url, redactor=Redactor()) as two,
    ):
        await one.create_session("b", session_id="a")
        await one.create_session("b", session_id="z")

        async def churn(store: PostgresStore, order: tuple[str, str]) -> None:
            for i in range(200):
                first = store.append_nowait(order[0], Text(text=str(i)))
                second = store.append_nowait(order[1], Text(text=str(i)))
                await asyncio.gather(first, second)

        await asyncio.gather(churn(one, ("a", "z")), churn(two, ("z", "a")))
        assert await one.last_seq("a") == await one.last_seq("z") == 400
        assert await one.integrity_check() == ["ok"]


async def test_writes_wait_out_a_database_restart_and_nothing_is_lost_or_doubled() -> None:
    with PostgresCluster.start() as own:  # its own server: this test stops it
        url = own.create_database("outage")
        async with PostgresStore(url, redactor=Redactor(), max_queue=120) as store:
            await store.create_session("b", session_id="s")
            await store.append_many("s", [Text(text=f"before {i}") for i in range(50)])
            await asyncio.to_thread(own.stop_server)
            pending = [store.append_nowait("s", Text(text=f"during {i}")) for i in range(100)]
            await asyncio.sleep(1.5)
            assert not any(f.done() for f in pending), "nothing is acknowledged while down"
            pending += [store.append_nowait("s", Text(text=f"more {i}")) for i in range(20)]
            with pytest.raises(DatabaseDownError) as full:  # past the bound: refused, and why
                store.append_nowait("s", Text(text="one too many"))
            assert "unreachable" in str(full.value)
            await asyncio.to_thread(own.start_server)
            stamped = await asyncio.wait_for(asyncio.gather(*pending), 60)
            assert [e.seq for e in stamped] == list(range(51, 171))
            logged = await store.read_events("s")
            assert [e.seq for e in logged] == list(range(1, 171))
            assert await store.integrity_check() == ["ok"]
            after = await store.append("s", Text(text="after"))
            assert after.seq == 171


async def test_a_raw_line_with_a_nul_byte_does_not_fail_its_batch(pg_url: str) -> None:
    async with PostgresStore(pg_url, redactor=Redactor()) as store:
        await store.create_session("b", session_id="s")
        store.record_raw("s", "stdout", "before\x00after")
        event = await store.append("s", Text(text="same batch"))
        assert event.seq == 1
        [raw] = await store.read_raw("s")
        assert raw.line == "before\ufffdafter"


# -- the listener -----------------------------------------------------------------------------


async def test_a_lost_listen_connection_is_reopened(pg_url: str) -> None:
    async with (
        PostgresStore(pg_url, redactor=Redactor()) as watcher,
        PostgresStore(pg_url, redactor=Redactor()) as other,
    ):
        woken = asyncio.Event()
        watcher.on_jobs_queued(woken.set)
        listener = watcher._listener
        assert listener is not None
        with psycopg.connect(pg_url, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (listener.backend_pid,))
        await asyncio.wait_for(woken.wait(), 15)  # the reconnect itself wakes claimers
        assert listener.connections == 2
        woken.clear()
        await other.create_job("after the loss")  # another process: only NOTIFY can tell
        await asyncio.wait_for(woken.wait(), 15)
        await other.create_session("b", session_id="s")
        async with await watcher.subscribe(None) as live:
            await other.append("s", Text(text="from the other process"))
            got = await asyncio.wait_for(anext(live), 15)
        assert (got.session_id, got.seq) == ("s", 1)


# -- redaction on the server's disk -------------------------------------------------------------


async def test_secrets_never_reach_the_database_files(
    pg_url: str, pg_cluster: PostgresCluster, chorus_home: Path
) -> None:
    secret = "sk-ant-api03-" + "Zq9" * 12
    async with PostgresStore(pg_url, redactor=Redactor()) as store:
        session = await store.create_session("b", transport={"env": {"API_KEY": secret}})
        await store.append(session.id, Text(text=f"key {secret}"))
        await store.append_raw(session.id, "stdout", json.dumps({"k": secret}))
        await store.create_job(f"use {secret}", options={"token": secret})
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CHECKPOINT")
    leaked = [p for p in pg_cluster.data_dir.rglob("*") if p.is_file() and _holds(p, secret)]
    assert leaked == []
    mirror = (chorus_home / "sessions" / f"{session.id}.jsonl").read_text()
    assert "[REDACTED:" in mirror
    assert secret not in mirror


def _holds(path: Path, needle: str) -> bool:
    try:
        return needle.encode() in path.read_bytes()
    except OSError:
        return False
