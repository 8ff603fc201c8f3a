"""``chorus migrate --to postgresql://...`` and ``chorus nodes`` against a real server."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import psycopg
import pytest
from typer.testing import CliRunner

from chorus.cli._app import _register, app
from chorus.events import Text
from chorus.store import (
    ControlStatus,
    Firing,
    JobState,
    PostgresStore,
    Redactor,
    SqliteStore,
    WorktreeRecord,
)
from chorus.testing import free_port

pytestmark = pytest.mark.postgres
runner = CliRunner()
_register()
WORKTREE = WorktreeRecord(
    job_id="j-done",
    repo="/repos/a",
    path="/wt/j-done",
    branch="chorus/j-done",
    base="main",
    base_commit="abc",
    into="main",
    state="merged",
    created_at=0.0,
    updated_at=0.0,
    info={"host": "box"},
)


async def populate() -> None:
    async with SqliteStore(redactor=Redactor()) as store:
        await store.create_session("claude", session_id="s1", model="m", transport={"pid": 7})
        await store.append_many("s1", [Text(text=f"t{i}") for i in range(5)])
        await store.append_raw("s1", "stdout", '{"raw": 1}')
        await store.record_control_request("s1", "r1", "interrupt")
        await store.record_control_response("s1", "r1", status=ControlStatus.OK)
        done = await store.create_job("done", session_id="s1", job_id="j-done")
        await store.claim_next_job()
        await store.update_job(done.id, state=JobState.SUCCEEDED, result={"text": "ok"})
        await store.create_job("was running", session_id="s1", job_id="j-run")
        await store.claim_next_job()
        await store.create_job("queued", job_id="j-queued")
        await store.set_routine_enabled("nightly", False)
        await store.create_fired_job(Firing("nightly", 1_800_000_000.0), "fired")
        await store.record_firing(Firing("nightly", 1_800_000_060.0), "skipped")
        await store.create_worktree(WORKTREE)


async def snapshot(store: SqliteStore | PostgresStore) -> tuple[object, ...]:
    session = await store.get_session("s1")
    return (
        session.last_seq,
        session.transport,
        await store.read_events("s1"),
        [(r.n, r.stream, r.line) for r in await store.read_raw("s1")],
        [(c.request_id, c.status) for c in await store.list_control_requests("s1")],
        [(j.id, j.state, j.result) for j in await store.list_jobs()],
        [(r.name, r.enabled, r.anchor_at) for r in await store.list_routine_records()],
        [(f.scheduled_for, f.outcome, f.job_id) for f in await store.list_firings("nightly")],
        [(w.job_id, w.path, w.into, w.info) for w in await store.list_worktrees()],
    )


def test_migrate_copies_a_sqlite_home_into_postgres(chorus_home: Path, pg_url: str) -> None:
    asyncio.run(populate())

    async def before() -> tuple[object, ...]:
        async with SqliteStore(redactor=Redactor()) as store:
            return await snapshot(store)

    old = asyncio.run(before())
    result = runner.invoke(app, ["migrate", "--to", pg_url, "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["copied"] == {
        "sessions": 1,
        "events": 5,
        "raw_lines": 1,
        "control_requests": 1,
        "jobs": 4,
        "routines": 1,
        "routine_firings": 2,
        "worktrees": 1,
    }

    async def after() -> tuple[tuple[object, ...], int]:
        async with PostgresStore(pg_url, redactor=Redactor()) as store:
            copied = await snapshot(store)
            assert await store.integrity_check() == ["ok"]
            return copied, (await store.append("s1", Text(text="next"))).seq

    new, next_seq = asyncio.run(after())
    old_jobs = old[5]
    assert isinstance(old_jobs, list)
    jobs = [(j, JobState.QUEUED if j == "j-run" else s, r) for j, s, r in old_jobs]
    assert new[:5] == old[:5]
    assert new[5] == jobs  # the running job is queued again, for a worker to claim
    assert new[6:] == old[6:]  # routines, their firings, worktrees
    assert next_seq == 6

    again = runner.invoke(app, ["migrate", "--to", pg_url])
    assert again.exit_code == 2
    assert "migrate into an empty database" in again.output


def test_migrate_refuses_bad_targets_and_writes_nothing(chorus_home: Path) -> None:
    asyncio.run(populate())
    bad = runner.invoke(app, ["migrate", "--to", "mysql://root:pw@db/x"])
    assert bad.exit_code == 2
    assert "use postgresql://" in bad.output
    url = f"postgresql://me:s3cret-password@127.0.0.1:{free_port()}/nowhere"
    down = runner.invoke(app, ["migrate", "--to", url])
    assert down.exit_code == 2
    assert "postgresql://me:***@127.0.0.1" in down.output
    assert "s3cret-password" not in down.output


def test_nodes_lists_the_worker_nodes(chorus_home: Path, pg_url: str) -> None:
    async def register() -> None:
        async with PostgresStore(pg_url, redactor=Redactor()) as store:
            await store.register_node("host1-abc", host="host1", bodies=["claude"])
            await store.create_job("x")
            await store.claim_job("host1-abc", lease_s=30)

    asyncio.run(register())
    chorus_home.mkdir(parents=True, exist_ok=True)
    (chorus_home / "config.toml").write_text(f'[store]\nurl = "{pg_url}"\n')
    result = runner.invoke(app, ["nodes", "--json"])
    assert result.exit_code == 0, result.output
    [node] = json.loads(result.output)
    assert (node["id"], node["host"], node["bodies"], node["running"]) == (
        "host1-abc",
        "host1",
        ["claude"],
        1,
    )
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT node FROM jobs").fetchone() == ("host1-abc",)
