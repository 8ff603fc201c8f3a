"""Two daemons (two CHORUS_HOMEs) on one PostgreSQL share a queue of real Claude
Code jobs; one is killed with -9 mid-job and the other completes that job once
its lease expired. Each daemon's ``chorus watch`` sees every event of every job."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from chorus.events import JobEnded, parse_event
from chorus.testing import ModelServer, claude_env, slow_text, text
from tests._wait import until
from tests.daemon.conftest import Node, write_config

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]


@pytest.fixture
def cluster(tmp_path: Path, pg_url: str) -> Iterator[tuple[list[Node], ModelServer, str]]:
    """Two homes pointed at one database and one scripted model server; both
    daemons run one job at a time and hold 3-second leases."""
    work = tmp_path / "work"
    work.mkdir()
    with ModelServer() as server:
        env = claude_env(tmp_path / "claude-home", server.url)  # one host: one Claude home
        extra = f'max_parallel_jobs = 1\n[store]\nurl = "{pg_url}"\nlease_s = 3.0'
        nodes = []
        for name in ("a", "b"):
            node = Node(tmp_path / f"home-{name}", work)
            write_config(node.home, {"claude": env}, extra)
            started = node.run("start")
            assert started.returncode == 0, started.stderr + _log(node)
            nodes.append(node)
        try:
            yield nodes, server, pg_url
        finally:
            for node in nodes:
                node.run("stop")
    assert server.errors == []


def _log(node: Node) -> str:
    path = node.home / "run" / "daemon.log"
    return path.read_text() if path.exists() else ""


def _jobs(url: str) -> dict[str, tuple[str, str | None, int]]:
    """job id -> (state, node, attempts), read straight from the shared database."""
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT id, state, node, attempts FROM jobs").fetchall()
    return {row[0]: (row[1], row[2], row[3]) for row in rows}


def _session_seqs(url: str, job_id: str) -> list[int]:
    """Every seq of the job's session, as stored."""
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT seq FROM events WHERE session_id = (SELECT session_id FROM jobs"
            " WHERE id = %s) ORDER BY seq",
            (job_id,),
        ).fetchall()
    return [row[0] for row in rows]


def _watch(node: Node, job_id: str) -> list[int]:
    """Follow the job on ``node`` with ``chorus watch`` to its end, then return the
    seqs of its events as ``chorus log --json`` prints them there."""
    watched = node.run("watch", job_id)
    assert watched.returncode == 0, watched.stdout + watched.stderr
    logged = node.run("log", job_id, "--json")
    events = [parse_event(line) for line in logged.stdout.splitlines() if line.startswith("{")]
    assert isinstance(events[-1], JobEnded)
    return [e.seq for e in events]


@pytest.mark.timeout(600)  # two daemons, five real CLI turns and a lease expiry
def test_two_daemons_share_the_queue_and_survive_a_kill_9(
    cluster: tuple[list[Node], ModelServer, str],
) -> None:
    (a, b), server, url = cluster
    server.script([text(f"answer {i}") for i in range(4)])
    ids = [a.run("task", f"question {i}", "--body", "claude").stdout.strip() for i in range(4)]
    until(lambda: all(_jobs(url)[j][0] == "succeeded" for j in ids), timeout=180)
    nodes = {_jobs(url)[j][1] for j in ids}
    assert len(nodes) == 2, f"both daemons should have run some jobs: {nodes}"
    for job_id in ids:  # every daemon shows every job, whoever ran it
        assert _watch(a, job_id) == _watch(b, job_id)

    server.script([slow_text("cut off by kill -9 " * 6, chunks=40, delay=0.25), text("resumed")])
    before = len(server.turn_requests())
    job_id = b.run("task", "survive a dead node", "--body", "claude").stdout.strip()
    server.wait_for(lambda reqs: sum(r.kind == "turn" for r in reqs) > before, timeout=60)
    until(lambda: _jobs(url)[job_id][0] == "running")
    time.sleep(1.0)
    holder_id = _jobs(url)[job_id][1]
    holder, other = (a, b) if holder_id == _node_of(url, a) else (b, a)
    os.kill(holder.pid(), signal.SIGKILL)
    seqs = _watch(other, job_id)  # the survivor re-queues it after the lease and runs it
    state, node, attempts = _jobs(url)[job_id]
    assert (state, attempts) == ("succeeded", 2)
    assert node == _node_of(url, other)
    session_seqs = _session_seqs(url, job_id)
    assert session_seqs == list(range(1, len(session_seqs) + 1))  # the log: gap-free
    assert seqs == sorted(seqs)
    assert set(seqs) <= set(session_seqs)
    assert "resumed" in other.run("watch", job_id).stdout


def _node_of(url: str, node: Node) -> str:
    """The node id a home registered (its id ends with a hash of the home path)."""
    from chorus.store import default_node_id

    old = os.environ.get("CHORUS_HOME")
    os.environ["CHORUS_HOME"] = str(node.home)
    try:
        return default_node_id()
    finally:
        if old is None:
            del os.environ["CHORUS_HOME"]
        else:
            os.environ["CHORUS_HOME"] = old
