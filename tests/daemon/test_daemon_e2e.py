"""The daemon and the everyday CLI, end to end with the real Claude Code CLI."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from chorus.client._lifecycle import read_pid
from chorus.events import JobEnded, Notice, TextDelta, parse_event
from chorus.testing import shell, slow_text, text
from tests._procs import ended
from tests._wait import until

if TYPE_CHECKING:
    from conftest import Chorus

pytestmark = pytest.mark.e2e


def test_ask_runs_a_tool_and_streams_events(shared_chorus: Chorus) -> None:
    chorus = shared_chorus
    chorus.server.script([shell("echo hello > out.txt"), text("all done")])
    result = chorus.run("ask", "make out.txt", "--body", "claude", "--format", "events")
    assert result.returncode == 0, result.stderr
    assert (chorus.work / "out.txt").read_text() == "hello\n"
    assert "all done" in result.stdout
    assert "job succeeded" in result.stdout


def test_ask_json_prints_parseable_events_ending_with_job_ended(shared_chorus: Chorus) -> None:
    chorus = shared_chorus
    chorus.server.script([text("just text")])
    result = chorus.run("ask", "say something", "--body", "claude", "--json")
    assert result.returncode == 0, result.stderr
    events = [parse_event(line) for line in result.stdout.splitlines()]
    seqs = [e.seq for e in events]
    assert seqs == sorted(seqs)
    assert isinstance(events[-1], JobEnded)
    assert events[-1].state == "succeeded"
    assert any(getattr(e, "text", None) == "just text" for e in events)


def test_task_returns_at_once_then_watch_follows_to_the_end(shared_chorus: Chorus) -> None:
    chorus = shared_chorus
    chorus.server.script([slow_text("slowly but surely", chunks=8, delay=0.25)])
    started = time.monotonic()
    task = chorus.run("task", "take your time", "--body", "claude")
    assert task.returncode == 0, task.stderr
    job_id = task.stdout.strip()
    assert chorus.client.job(job_id)["state"] in ("queued", "running")
    watched = chorus.run("watch", job_id)
    assert watched.returncode == 0, watched.stderr
    assert "slowly but surely" in watched.stdout
    assert time.monotonic() - started >= 2.0  # the stream really took its time
    assert chorus.client.job(job_id)["state"] == "succeeded"


def test_second_job_of_a_session_waits_behind_the_first(shared_chorus: Chorus) -> None:
    chorus = shared_chorus
    chorus.server.script([slow_text("first job", chunks=8, delay=0.25), text("second job")])
    first = chorus.run("task", "one", "--body", "claude").stdout.strip()
    until(lambda: chorus.client.job(first)["session_id"] is not None)
    session = chorus.client.job(first)["session_id"]
    second = chorus.run("task", "two", "--session", session).stdout.strip()
    assert chorus.run("watch", second).returncode == 0
    one, two = chorus.client.job(first), chorus.client.job(second)
    assert one["state"] == two["state"] == "succeeded"
    assert two["started_at"] >= one["ended_at"]
    # The second turn ran in the same native session: the model saw the first answer.
    last = chorus.server.turn_requests()[-1]
    assert "first job" in json.dumps(last.body)


def test_interrupt_ends_a_running_job_as_cancelled(shared_chorus: Chorus) -> None:
    chorus = shared_chorus
    chorus.server.script([slow_text("never finished " * 10, chunks=40, delay=0.25)])
    job_id = chorus.run("task", "long", "--body", "claude").stdout.strip()
    _streaming(chorus, job_id)
    assert chorus.run("interrupt", job_id).stdout.strip() == "interrupted"
    watched = chorus.run("watch", job_id, timeout=30)
    assert watched.returncode == 3
    assert chorus.client.job(job_id)["state"] == "cancelled"


def test_an_interrupt_while_the_body_starts_cancels_the_job_before_its_turn(
    shared_chorus: Chorus,
) -> None:
    chorus = shared_chorus
    turns = len(chorus.server.turn_requests())
    chorus.server.script([text("should never be asked")])
    job_id = chorus.run("task", "stop at once", "--body", "claude").stdout.strip()
    until(lambda: chorus.client.job(job_id)["state"] != "queued", timeout=60)
    assert chorus.client.interrupt(job_id)["result"] == "interrupted"  # its CLI still starts
    watched = chorus.run("watch", job_id, timeout=60)
    assert watched.returncode == 3, watched.stdout + watched.stderr
    assert chorus.client.job(job_id)["state"] == "cancelled"
    assert len(chorus.server.turn_requests()) == turns  # the model was never asked


def _streaming(chorus: Chorus, job_id: str) -> None:
    """Wait until the model is streaming the job's first (slow) turn and some of its
    text is stored."""
    chorus.server.wait_for(lambda reqs: any(r.kind == "turn" for r in reqs), timeout=60)
    events = lambda: chorus.client.events(job_id, follow=False)  # noqa: E731
    until(lambda: sum(isinstance(e, TextDelta) for e in events()) >= 2)


def _session(chorus: Chorus, job_id: str) -> dict[str, Any]:
    return chorus.client.session(chorus.client.job(job_id)["session_id"])


def _body_pgid(chorus: Chorus, job_id: str) -> int:
    return int(_session(chorus, job_id)["transport"]["pgid"])


def test_body_killed_mid_job_is_resumed_and_the_job_completes(shared_chorus: Chorus) -> None:
    chorus = shared_chorus
    chorus.server.script(
        [slow_text("interrupted by a crash " * 5, chunks=40, delay=0.25), text("recovered")]
    )
    job_id = chorus.run("task", "survive", "--body", "claude").stdout.strip()
    until(lambda: chorus.client.job(job_id)["state"] == "running")
    until(lambda: "pgid" in _session(chorus, job_id)["transport"])
    _streaming(chorus, job_id)
    os.killpg(_body_pgid(chorus, job_id), signal.SIGKILL)
    watched = chorus.run("watch", job_id)
    assert watched.returncode == 0, watched.stdout
    job = chorus.client.job(job_id)
    assert job["state"] == "succeeded"
    events = list(chorus.client.events(job_id, follow=False))
    assert any(isinstance(e, Notice) and e.kind == "recovery" for e in events)
    assert "recovered" in watched.stdout


def test_daemon_killed_mid_job_loses_nothing_and_the_job_completes(chorus: Chorus) -> None:
    chorus.server.script(
        [slow_text("cut off by the daemon dying " * 5, chunks=40, delay=0.25), text("back")]
    )
    job_id = chorus.run("task", "survive the daemon", "--body", "claude").stdout.strip()
    _streaming(chorus, job_id)
    before = [e.seq for e in chorus.client.events(job_id, follow=False)]
    assert before, "some events were acknowledged before the crash"
    pid = read_pid()
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    until(lambda: ended(pid), 10)  # its threads too: they hold its socket
    watched = chorus.run("watch", job_id)  # autostarts a new daemon
    assert watched.returncode == 0, watched.stdout + watched.stderr
    assert read_pid() != pid
    events = list(chorus.client.events(job_id, follow=False))
    seqs = [e.seq for e in events]
    assert seqs[: len(before)] == before  # nothing acknowledged was lost
    assert len(seqs) == len(set(seqs))  # nothing duplicated
    session_events = chorus.client.session(chorus.client.job(job_id)["session_id"])
    assert session_events["last_seq"] >= max(seqs)
    assert sum(isinstance(e, JobEnded) for e in events) == 1
    assert chorus.client.job(job_id)["state"] == "succeeded"


def test_status_and_stop(chorus: Chorus) -> None:
    assert chorus.run("status").stdout.startswith("daemon: not running")
    assert chorus.run("start").returncode == 0
    status = json.loads(chorus.run("status", "--json").stdout)
    assert status["pid"] == read_pid()
    sock = chorus.home / "run" / "chorus.sock"
    assert oct(sock.stat().st_mode & 0o777) == "0o600"
    assert chorus.run("stop").stdout.strip() == "daemon stopped"
    assert chorus.run("status").stdout.startswith("daemon: not running")


def _nothing_written(home: Path) -> bool:
    return not (home / "chorus.db").exists() and not (home / "run").exists()


def test_unknown_body_exits_2_and_writes_nothing(chorus: Chorus) -> None:
    result = chorus.run("ask", "hi", "--body", "nonesuch")
    assert result.returncode == 2
    assert "unknown body 'nonesuch'" in result.stderr
    assert _nothing_written(chorus.home)


def test_bad_config_exits_2_and_writes_nothing(chorus: Chorus) -> None:
    (chorus.home / "config.toml").write_text("[daemon]\nmax_parallel_jobs = 'many'\n")
    result = chorus.run("ask", "hi", "--body", "claude")
    assert result.returncode == 2
    assert "max_parallel_jobs" in result.stderr
    assert _nothing_written(chorus.home)


def test_missing_cli_exits_2_and_writes_nothing(chorus: Chorus) -> None:
    with (chorus.home / "config.toml").open("a") as f:
        f.write('[agents.claude]\ncommand = "/nonexistent/claude"\n')
    result = chorus.run("task", "hi", "--body", "claude")
    assert result.returncode == 2
    assert "not found" in result.stderr
    assert _nothing_written(chorus.home)
