"""End to end on the real CLIs (in their bubblewrap sandbox): bodies outlive
a daemon killed with SIGKILL mid-turn, and the next daemon re-attaches by offset.
The same CLI process finishes the same turn, the scripted model server saw one
request for it, and the session's log has no seq gap and no duplicate."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from chorus.client._lifecycle import read_pid
from chorus.daemon import stop_daemon
from chorus.events import Event, JobEnded, Notice, TextDelta, TurnCompleted
from chorus.testing import slow_text, text
from tests._procs import alive, end_bodies_left, kill_daemon, same_process
from tests._wait import until

if TYPE_CHECKING:
    from conftest import Daemon

    Chorus = Daemon

pytestmark = pytest.mark.e2e
WORDS = " ".join(f"w{i}" for i in range(40))
LONG = " ".join(f"w{i}" for i in range(100))


def _session(chorus: Chorus, job_id: str) -> dict[str, Any]:
    return chorus.client.session(chorus.client.job(job_id)["session_id"])


def _events(chorus: Chorus, job_id: str) -> list[Event]:
    return list(chorus.client.events(job_id, follow=False))


def _deltas(chorus: Chorus, job_id: str) -> int:
    return sum(isinstance(e, TextDelta) for e in _events(chorus, job_id))


@pytest.fixture
def chorus(daemon_with: Callable[..., Daemon]) -> Iterator[Daemon]:
    daemon = daemon_with()
    yield daemon
    stop_daemon()
    end_bodies_left(daemon.home)  # a failed test may leave detached bodies running


def _start_slow_job(
    chorus: Chorus, *later: Any, words: str = WORDS, body: str = "claude"
) -> tuple[str, dict[str, Any]]:
    """A job whose turn streams a delta each 0.25 s; returns it once some text is
    stored, with the stored handle of its body."""
    chunks = len(words.split())
    chorus.server.script([slow_text(words, chunks=chunks, delay=0.25), *later], lane=body)
    job_id = chorus.run("task", "survive", "--body", body).stdout.strip()
    until(lambda: _deltas(chorus, job_id) >= 3)
    handle = _session(chorus, job_id)["transport"]["body_handle"]
    return job_id, handle


def _check_log(chorus: Chorus, job_id: str) -> list[Event]:
    """The session's seqs run 1..N with no gap and no duplicate; the job's events."""
    session = _session(chorus, job_id)
    every = list(chorus.client.events(job_id, follow=False))
    seqs = [e.seq for e in every]
    assert len(seqs) == len(set(seqs))
    assert seqs == sorted(seqs)
    assert session["last_seq"] >= max(seqs)
    return every


@pytest.mark.parametrize("body", ["claude", "codex", "gemini"])
def test_daemon_killed_mid_turn_the_same_cli_finishes_the_same_turn(
    chorus: Chorus, body: str
) -> None:
    job_id, handle = _start_slow_job(chorus, body=body)
    kill_daemon()
    assert same_process(handle)  # the body outlived its daemon
    watched = chorus.run("watch", job_id)  # autostarts a new daemon, which re-attaches
    assert watched.returncode == 0, watched.stdout[-2000:] + watched.stderr[-2000:]
    assert chorus.client.job(job_id)["state"] == "succeeded"
    events = _check_log(chorus, job_id)
    texts = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert texts == WORDS  # no delta lost, none twice
    done = [e for e in events if isinstance(e, TurnCompleted)]
    assert len(done) == 1
    assert done[0].result == WORDS
    assert sum(isinstance(e, JobEnded) for e in events) == 1
    assert len(chorus.server.turn_requests(lane=body)) == 1  # the turn was not run again
    assert same_process(handle)  # the very CLI process, still warm for the next job
    assert _session(chorus, job_id)["transport"]["pgid"] == handle["pid"]


def test_daemon_killed_twice_in_a_row_still_loses_and_repeats_nothing(chorus: Chorus) -> None:
    job_id, handle = _start_slow_job(chorus, words=LONG)
    kill_daemon()
    assert chorus.run("start").returncode == 0
    seen = _deltas(chorus, job_id)
    until(lambda: _deltas(chorus, job_id) >= seen + 3)  # the new daemon follows the turn
    kill_daemon()
    watched = chorus.run("watch", job_id)
    assert watched.returncode == 0, watched.stdout[-2000:] + watched.stderr[-2000:]
    events = _check_log(chorus, job_id)
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == LONG
    assert len(chorus.server.turn_requests(lane="claude")) == 1
    assert same_process(handle)


def test_body_that_died_while_the_daemon_was_down_is_resumed_natively(chorus: Chorus) -> None:
    job_id, handle = _start_slow_job(chorus, text("resumed natively"))
    kill_daemon()
    os.killpg(int(handle["pid"]), signal.SIGKILL)
    until(lambda: not same_process(handle), 10)
    watched = chorus.run("watch", job_id)
    assert watched.returncode == 0, watched.stdout[-2000:] + watched.stderr[-2000:]
    events = _check_log(chorus, job_id)
    notes = [e.message for e in events if isinstance(e, Notice) and e.kind == "recovery"]
    assert any("body_crashed" in note and "daemon was down" in note for note in notes)
    assert "resumed natively" in watched.stdout
    assert len(chorus.server.turn_requests(lane="claude")) == 2
    now = _session(chorus, job_id)["transport"]["body_handle"]
    assert now["pid"] != int(handle["pid"])  # a new CLI process resumed the session


def test_output_file_cut_under_the_daemon_is_a_crash_resumed_natively(chorus: Chorus) -> None:
    job_id, handle = _start_slow_job(chorus, text("after the cut"))
    (Path(handle["run_dir"]) / "stdout").write_bytes(b"")  # truncated under the daemon
    watched = chorus.run("watch", job_id)
    assert watched.returncode == 0, watched.stdout[-2000:] + watched.stderr[-2000:]
    assert chorus.client.job(job_id)["state"] == "succeeded"
    events = _check_log(chorus, job_id)
    assert any(isinstance(e, Notice) and e.kind == "recovery" for e in events)
    assert "after the cut" in watched.stdout
    crashed = [e for e in events if getattr(e, "error", None) is not None]
    assert any("output file was truncated" in str(e.model_dump()) for e in crashed)
    assert not same_process(handle)  # the unreadable body was ended


def test_stop_keep_bodies_leaves_them_running_and_the_next_start_reattaches(
    chorus: Chorus,
) -> None:
    job_id, handle = _start_slow_job(chorus, words=LONG)
    daemon = read_pid()
    assert daemon is not None
    stopped = chorus.run("stop", "--keep-bodies")
    assert stopped.returncode == 0, stopped.stderr
    assert not alive(daemon)  # the daemon is gone
    assert same_process(handle)  # a graceful stop left the CLI running
    watched = chorus.run("watch", job_id)
    assert watched.returncode == 0, watched.stdout[-2000:] + watched.stderr[-2000:]
    events = _check_log(chorus, job_id)
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == LONG
    assert len(chorus.server.turn_requests(lane="claude")) == 1
    assert same_process(handle)
    assert chorus.run("stop").returncode == 0  # a plain stop closes bodies again
    until(lambda: not same_process(handle), 5)  # (init reaps the killed wrapper)
    assert not Path(handle["run_dir"]).exists()  # and removes their files


def test_output_is_freed_once_stored_and_a_reattach_reads_past_the_hole(chorus: Chorus) -> None:
    chorus.server.script(
        [slow_text(LONG, chunks=100, delay=0.01), slow_text(WORDS, chunks=40, delay=0.25)],
        lane="claude",
    )
    first = chorus.run("ask", "one", "--body", "claude", "--json")
    assert first.returncode == 0, first.stderr
    session_id = chorus.client.jobs()[0]["session_id"]
    handle = chorus.client.session(session_id)["transport"]["body_handle"]
    out = Path(handle["run_dir"]) / "stdout"
    until(lambda: out.stat().st_blocks * 512 < out.stat().st_size - 4096, 10)
    job_id = chorus.run("task", "two", "--session", session_id).stdout.strip()
    until(lambda: _deltas(chorus, job_id) >= 3)
    kill_daemon()
    watched = chorus.run("watch", job_id)
    assert watched.returncode == 0, watched.stdout[-2000:] + watched.stderr[-2000:]
    events = [e for e in _check_log(chorus, job_id) if e.job_id == job_id]
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == WORDS
    assert len(chorus.server.turn_requests(lane="claude")) == 2  # one per job, none again
    assert same_process(handle)


def test_a_warm_body_between_jobs_outlives_the_daemon_and_takes_the_next_job(
    chorus: Chorus,
) -> None:
    chorus.server.script([text("first"), text("second")], lane="claude")
    first = chorus.run("ask", "one", "--body", "claude", "--json")
    assert first.returncode == 0, first.stderr
    session_id = chorus.client.jobs()[0]["session_id"]
    handle = chorus.client.session(session_id)["transport"]["body_handle"]
    kill_daemon()  # nothing runs: the body waits warm for its next job
    second = chorus.run("ask", "two", "--session", session_id, "--json")
    assert second.returncode == 0, second.stdout[-2000:] + second.stderr[-2000:]
    assert "second" in second.stdout
    assert same_process(handle)  # the same CLI process took the follow-up
    assert chorus.client.session(session_id)["transport"]["pgid"] == handle["pid"]
    assert len(chorus.server.turn_requests(lane="claude")) == 2
    last = chorus.server.turn_requests(lane="claude")[-1]
    assert "first" in json.dumps(last.body)  # in the same conversation
