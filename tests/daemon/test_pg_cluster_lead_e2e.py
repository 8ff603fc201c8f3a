"""Two daemons (two CHORUS_HOMEs) on one PostgreSQL, with real Claude Code jobs:
routines fire once across the cluster, from the node holding the advisory lock,
and the other node takes over when the leader is killed with -9; ``chorus status``
and ``chorus jobs`` show the nodes; a job whose cwd is host-local runs only on its
host (the two daemons pose as two hosts)."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from chorus.testing import ModelServer, claude_env, error, slow_text, text
from tests._wait import until
from tests.daemon.conftest import Node, write_config

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]

ROUTINE = '[routine]\nevery = "3s"\nmodel_preference = "claude"\n[routine.task]\nprompt = "tick"\n'


Start = Callable[..., list[Node]]


@pytest.fixture
def start(tmp_path: Path, pg_url: str) -> Iterator[tuple[Start, ModelServer, str]]:
    """``start(hosts, routine=False)``: one daemon per host name, all on one database."""
    work = tmp_path / "work"
    work.mkdir()
    started: list[Node] = []
    with ModelServer() as server:
        env = claude_env(tmp_path / "claude-home", server.url)

        def make(hosts: list[str], *, routine: bool = False, extra: str = "") -> list[Node]:
            for i, host in enumerate(hosts):
                node = Node(tmp_path / f"home-{i}", work)
                config = (
                    f'max_parallel_jobs = 1\n[store]\nurl = "{pg_url}"\nlease_s = 3.0\n'
                    f'host = "{host}"\n[routines]\nheartbeat = false\n{extra}'
                )
                write_config(node.home, {"claude": env}, config)
                if routine:
                    (node.home / "routines").mkdir(parents=True, exist_ok=True)
                    (node.home / "routines" / "tick.toml").write_text(ROUTINE)
                done = node.run("start")
                assert done.returncode == 0, done.stderr
                started.append(node)
            return list(started)

        try:
            yield make, server, pg_url
        finally:
            for node in started:
                node.run("stop")


def _rows(url: str, query: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(url) as conn:
        return conn.execute(query.encode()).fetchall()


def _firings(url: str) -> list[tuple[Any, ...]]:
    """(scheduled_for, job id, node that fired it) of every queued firing of ``tick``."""
    return _rows(
        url,
        "SELECT f.scheduled_for, f.job_id, j.options::jsonb ->> 'fired_by' FROM routine_firings f"
        " JOIN jobs j ON j.id = f.job_id WHERE f.routine = 'tick' ORDER BY f.scheduled_for",
    )


def _leads(node: Node) -> bool:
    status = node.json("status")
    return bool(status.get("routines_leader"))


@pytest.mark.timeout(600)
def test_a_routine_fires_once_from_the_leader_and_the_other_node_takes_over(
    start: tuple[Start, ModelServer, str],
) -> None:
    make, _server, url = start
    a, b = make(["same-host", "same-host"], routine=True)
    until(lambda: len(_firings(url)) >= 3, timeout=90)
    leaders = [n for n in (a, b) if _leads(n)]
    assert len(leaders) == 1, "exactly one node leads the routines"
    leader = leaders[0]
    follower = b if leader is a else a
    leader_id = leader.json("status")["node"]["id"]
    firings = _firings(url)
    assert {fired_by for _, _, fired_by in firings} == {leader_id}
    jobs = _rows(url, "SELECT id FROM jobs WHERE options::jsonb ->> 'routine' = 'tick'")
    assert sorted(j for (j,) in jobs) == sorted(job for _, job, _ in firings)  # one job each
    times = [at for at, _, _ in firings]
    assert len(times) == len(set(times))

    status = follower.run("status")
    assert "routines: another node fires them" in status.stdout, status.stdout
    assert f"{leader_id} on same-host" in status.stdout

    os.kill(leader.pid(), signal.SIGKILL)  # its lock connection dies with it
    until(lambda: _leads(follower), timeout=60)
    follower_id = follower.json("status")["node"]["id"]
    until(lambda: any(by == follower_id for _, _, by in _firings(url)), timeout=60)
    after = _firings(url)
    assert len({at for at, _, _ in after}) == len(after)  # still once per scheduled time
    listed = follower.json("jobs")
    assert {row["node"] for row in listed if row["state"] == "succeeded"} <= {
        leader_id,
        follower_id,
    }
    assert any(row["node"] == follower_id for row in listed)


@pytest.mark.timeout(600)
def test_a_host_local_job_runs_only_on_its_host(start: tuple[Start, ModelServer, str]) -> None:
    make, server, url = start
    a, b = make(["host-a", "host-b"])
    server.script([slow_text(f"answer {i} " * 4, chunks=4, delay=0.5) for i in range(4)])
    ids = [a.run("task", f"question {i}", "--body", "claude").stdout.strip() for i in range(3)]
    b_job = b.run("task", "question from b", "--body", "claude").stdout.strip()
    states = "SELECT state FROM jobs"
    until(lambda: [s for (s,) in _rows(url, states)] == ["succeeded"] * 4, timeout=240)
    rows = {r["id"]: r for r in a.json("jobs")}
    a_id, b_id = a.json("status")["node"]["id"], b.json("status")["node"]["id"]
    for job_id in ids:  # host-b's daemon idles meanwhile, but never takes host-a's jobs
        assert (rows[job_id]["affinity"], rows[job_id]["node"]) == ("host-a", a_id)
    assert (rows[b_job]["affinity"], rows[b_job]["node"]) == ("host-b", b_id)
    nodes = {n["host"]: n for n in b.json("status")["nodes"]}
    assert set(nodes) == {"host-a", "host-b"}
    table = b.run("jobs").stdout.splitlines()
    assert table[0].split()[:5] == ["job", "state", "body", "session", "node"]
    assert sorted(line.split()[4] for line in table[1:]) == sorted([a_id] * 3 + [b_id])


@pytest.mark.timeout(600)
def test_one_nodes_quota_cooldown_is_seen_by_the_other(
    start: tuple[Start, ModelServer, str],
) -> None:
    make, server, url = start
    router = '[router]\nbodies = ["claude"]\nfailover = false\ncooldown_base_s = 600.0\n'
    a, b = make(["host-a", "host-b"], extra=router)
    assert [h for h in b.json("status")["health"] if h["quota_state"] != "ok"] == []
    server.script([error("quota", times=None)])
    job_id = a.run("task", "spend the quota", "--body", "claude").stdout.strip()
    failed = [("failed",)]
    until(lambda: _rows(url, f"SELECT state FROM jobs WHERE id = '{job_id}'") == failed, 90)

    def cooling(node: Node) -> list[dict[str, Any]]:
        health = node.json("status")["health"]
        return [h for h in health if h["quota_state"] == "exhausted"]

    until(lambda: bool(cooling(b)), timeout=30)  # b re-reads the shared health
    (seen,) = cooling(b)
    assert seen["key"].startswith("claude@")
    assert seen["cooldown_until"] > time.time() + 500
    assert "cooling down" in b.run("status").stdout
    (stored,) = _rows(url, "SELECT key, node FROM provider_health")
    assert stored == (seen["key"], a.json("status")["node"]["id"])


@pytest.mark.timeout(600)
def test_a_frozen_node_stops_the_job_another_node_took_over(
    start: tuple[Start, ModelServer, str],
) -> None:
    """SIGSTOP a daemon past its lease: the other node takes the job over and runs it;
    once the frozen one wakes, it learns it lost the job (``on_lost``), stops it
    without ending it, and the job ends once, on the node that holds it."""
    make, server, url = start
    a, b = make(["same-host", "same-host"])
    server.script([slow_text("frozen mid-turn " * 8, chunks=40, delay=0.3), text("took over")])
    job_id = a.run("task", "survive a frozen node", "--body", "claude").stdout.strip()
    server.wait_for(lambda reqs: any(r.kind == "turn" for r in reqs), timeout=60)
    holder_id = _rows(url, f"SELECT node FROM jobs WHERE id = '{job_id}'")[0][0]
    holder, other = (a, b) if holder_id == a.json("status")["node"]["id"] else (b, a)
    other_id = other.json("status")["node"]["id"]
    os.kill(holder.pid(), signal.SIGSTOP)
    try:
        until(
            lambda: (
                _rows(url, f"SELECT node, attempts FROM jobs WHERE id = '{job_id}'")
                == [(other_id, 2)]
            ),
            timeout=60,
        )
    finally:
        os.kill(holder.pid(), signal.SIGCONT)
    succeeded = [("succeeded",)]
    until(lambda: _rows(url, f"SELECT state FROM jobs WHERE id = '{job_id}'") == succeeded, 90)
    until(lambda: job_id not in holder.json("status")["running_jobs"], timeout=30)
    ended = _rows(
        url,
        "SELECT seq FROM events WHERE type = 'job_ended'"
        f" AND payload::jsonb ->> 'job_id' = '{job_id}'",
    )
    assert len(ended) == 1, "the job ended once, by the node that held it"
    final = _rows(url, f"SELECT state, node, attempts FROM jobs WHERE id = '{job_id}'")
    assert final == [("succeeded", other_id, 2)]
    log = (holder.home / "run" / "daemon.log").read_text()
    assert f"job {job_id} went back to node {other_id}" in log, log[-2000:]
    assert f"job {job_id}: closing its body here; the job is not ended" in log, log[-2000:]
    assert f"job {job_id} went to node {other_id} while it ran here; not ending it" in log
