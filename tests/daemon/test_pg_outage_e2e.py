"""The shared database goes away mid-run: a real Claude Code job keeps
running on its daemon, its events wait in the writer's buffer, the daemon says so
and claims nothing meanwhile, and once the server is back the job completes with
every event in the log, never re-run. Past the buffer's bound the daemon refuses
new jobs and says why."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from chorus.config import load_config
from chorus.daemon import JobRequest, Supervisor
from chorus.daemon._cluster import StoreDownError
from chorus.testing import ModelServer, PostgresCluster, claude_env, slow_text
from tests._wait import until
from tests.daemon.conftest import write_config

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]


@pytest.fixture
def own_cluster() -> Iterator[PostgresCluster]:
    """A server of this test's own: it is stopped and started again."""
    try:
        cluster = PostgresCluster.start()
    except Exception as exc:  # same rule as tests/conftest.py's pg_cluster
        if os.environ.get("CHORUS_REQUIRE_AGENTS") == "1":
            pytest.fail(f"PostgreSQL is required: {exc}")
        pytest.skip(f"PostgreSQL not available: {exc}")
    with cluster:
        yield cluster


def _chorus(home: Path, work: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "chorus", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "CHORUS_HOME": str(home)},
        cwd=work,
    )


def _status(home: Path, work: Path) -> dict[str, Any]:
    done = _chorus(home, work, "status", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    data: dict[str, Any] = json.loads(done.stdout)
    return data


@pytest.mark.timeout(600)
def test_a_job_runs_through_a_database_outage_and_loses_nothing(
    own_cluster: PostgresCluster, tmp_path: Path
) -> None:
    url = own_cluster.create_database("outage")
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    words = "streaming through an outage " * 8
    with ModelServer() as server:
        env = claude_env(tmp_path / "claude-home", server.url)
        write_config(home, {"claude": env}, f'[store]\nurl = "{url}"\nlease_s = 3.0')
        assert _chorus(home, work, "start").returncode == 0
        try:
            server.script([slow_text(words, chunks=40, delay=0.3)])
            job_id = _chorus(home, work, "task", "talk slowly", "--body", "claude").stdout.strip()
            server.wait_for(lambda reqs: any(r.kind == "turn" for r in reqs), timeout=60)
            time.sleep(1.0)
            own_cluster.stop_server()
            stopped = time.monotonic()
            until(lambda: _status(home, work)["store_outage"] is not None, timeout=30)
            assert time.monotonic() - stopped < 15  # status answers, never hangs on a read
            status = _status(home, work)
            assert status["accepting_jobs"] is True  # within the bound: still taking jobs
            assert status["running_jobs"] == [job_id]  # the job runs on meanwhile
            text = _chorus(home, work, "status").stdout
            assert "store: the database has been unreachable" in text, text
            time.sleep(4.0)  # longer than the lease: nobody could take the job over
            own_cluster.start_server()
            until(lambda: _status(home, work)["store_outage"] is None, timeout=90)
            until(lambda: _job(url, job_id)[0] == "succeeded", timeout=120)
        finally:
            _chorus(home, work, "stop")
    state, attempts, result = _job(url, job_id)
    assert (state, attempts) == ("succeeded", 1)  # never re-run
    assert json.loads(result) == {"text": words}
    seqs = _seqs(url, job_id)
    assert seqs == list(range(1, len(seqs) + 1))  # every event, gap-free


def _job(url: str, job_id: str) -> tuple[str, int, str]:
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT state, attempts, result FROM jobs WHERE id = %s", (job_id,)
        ).fetchone()
    assert row is not None
    return row[0], row[1], row[2]


def _seqs(url: str, job_id: str) -> list[int]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT seq FROM events WHERE session_id = (SELECT session_id FROM jobs"
            " WHERE id = %s) ORDER BY seq",
            (job_id,),
        ).fetchall()
    return [row[0] for row in rows]


async def test_past_the_bound_the_daemon_refuses_new_jobs_and_says_why(
    own_cluster: PostgresCluster, chorus_home: Path
) -> None:
    from chorus.store import DatabaseDownError, PostgresStore, Redactor

    url = own_cluster.create_database("bound")
    async with PostgresStore(url, redactor=Redactor(), max_queue=10) as store:
        sup = Supervisor(store, load_config())
        session = await store.create_session("claude", session_id="s")
        assert sup.refusal() is None
        await asyncio.to_thread(own_cluster.stop_server)
        store.record_raw(session.id, "stdout", "first line while down")
        for _ in range(100):  # the writer meets the outage, then the buffer fills
            await asyncio.sleep(0.1)
            if store.outage() is not None:
                break
        for i in range(9):  # with the line in flight: the bound of 10 writes
            store.record_raw(session.id, "stdout", f"line {i}")
        with pytest.raises(DatabaseDownError):
            store.record_raw(session.id, "stdout", "one too many")
        refusal = sup.refusal()
        assert refusal is not None
        assert refusal.startswith("not accepting new jobs: the database has been unreachable")
        assert sup.status()["accepting_jobs"] is False
        with pytest.raises(StoreDownError, match="not accepting new jobs"):
            await sup.submit(JobRequest(prompt="anything", body="claude"))
        await asyncio.to_thread(own_cluster.start_server)
        for _ in range(600):
            if store.outage() is None:
                break
            await asyncio.sleep(0.1)
        assert sup.refusal() is None
        lines = await store.read_raw(session.id)
        assert [raw.line for raw in lines] == ["first line while down"] + [
            f"line {i}" for i in range(9)
        ]
