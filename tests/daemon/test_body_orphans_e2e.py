"""No process of a body outlives it, and no body outlives its daemon for long.

A Codex whose CLI process is killed (its native ``codex app-server``, which Chorus runs
without the ``node`` launcher) leaves nothing of its group behind (a child left would
hold the thread, and the resume would fail "already has an active writer");
the job resumes and succeeds. Bodies a daemon killed with SIGKILL left running (to be
re-attached) are ended by ``chorus stop``, and end themselves after
``[daemon] orphan_timeout_s`` with no daemon; the job then resumes natively."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from chorus.daemon import stop_daemon
from chorus.events import Event, Notice, TextDelta
from chorus.testing import slow_text, text
from tests._procs import group, kill_daemon, same_process, started_at
from tests._wait import until

if TYPE_CHECKING:
    from conftest import Daemon

pytestmark = pytest.mark.e2e
WORDS = " ".join(f"w{i}" for i in range(40))


@pytest.fixture
def chorus(daemon_with: Callable[..., Daemon]) -> Iterator[Daemon]:
    daemon = daemon_with()
    yield daemon
    stop_daemon()


def _events(chorus: Daemon, job_id: str) -> list[Event]:
    return list(chorus.client.events(job_id, follow=False))


def _handle(chorus: Daemon, job_id: str) -> dict[str, Any]:
    session = chorus.client.session(chorus.client.job(job_id)["session_id"])
    return dict(session["transport"]["body_handle"])


def _codex_cli(pgid: int) -> int:
    """The Codex CLI's own process in ``pgid``: its ``node`` launcher where one runs,
    else the native app-server Chorus starts directly."""
    procs = group(pgid)
    for pid, _ in procs:
        if os.path.basename(os.readlink(f"/proc/{pid}/exe")).startswith("node"):
            return pid
    for pid, cmd in procs:
        exe = os.path.basename(os.readlink(f"/proc/{pid}/exe"))
        if exe == "codex" and "app-server" in cmd:
            return pid
    raise AssertionError(f"no Codex CLI in group {pgid}: {procs}")


def test_codex_launcher_killed_mid_turn_leaves_no_app_server_and_resumes(
    chorus: Daemon,
) -> None:
    chunks = len(WORDS.split())
    chorus.server.script(
        [slow_text(WORDS, chunks=chunks, delay=0.25), text("resumed after the kill")],
        lane="codex",
    )
    job_id = chorus.run("task", "survive", "--body", "codex").stdout.strip()
    until(lambda: sum(isinstance(e, TextDelta) for e in _events(chorus, job_id)) >= 3)
    first = _handle(chorus, job_id)
    pgid = int(first["pid"])
    natives = [(pid, started_at(pid)) for pid, cmd in group(pgid) if "app-server" in cmd]
    os.kill(_codex_cli(pgid), signal.SIGKILL)
    watched = chorus.run("watch", job_id, timeout=180)
    assert watched.returncode == 0, watched.stdout[-3000:] + watched.stderr[-3000:]
    assert chorus.client.job(job_id)["state"] == "succeeded"
    assert "resumed after the kill" in watched.stdout
    notes = [e.message for e in _events(chorus, job_id) if isinstance(e, Notice)]
    assert any("body crashed; resuming natively" in n for n in notes), notes
    assert group(pgid) == []  # nothing of the killed body is left
    assert natives
    # Gone, a zombie, or the pid reused by another process (pid_max may be small).
    assert not any(started_at(pid) == started for pid, started in natives)
    now = _handle(chorus, job_id)
    assert int(now["pid"]) != pgid  # a new app-server resumed the thread
    assert chorus.run("stop").returncode == 0
    until(lambda: group(int(now["pid"])) == [], 15)


def _start_slow_job(chorus: Daemon, *later: Any) -> tuple[str, dict[str, Any]]:
    """A claude job streaming a delta each 0.25 s, once some text is stored; and the
    stored handle of its body."""
    chorus.server.script([slow_text(WORDS, chunks=40, delay=0.25), *later], lane="claude")
    job_id = chorus.run("task", "survive", "--body", "claude").stdout.strip()
    until(lambda: sum(isinstance(e, TextDelta) for e in _events(chorus, job_id)) >= 3)
    return job_id, _handle(chorus, job_id)


def test_chorus_stop_with_no_daemon_ends_the_bodies_a_killed_daemon_left(chorus: Daemon) -> None:
    _, handle = _start_slow_job(chorus)
    kill_daemon()
    time.sleep(1.0)
    assert same_process(handle)  # the body waits to be re-attached (by design)
    stopped = chorus.run("stop")
    assert stopped.returncode == 0, stopped.stderr
    assert "no daemon was running" in stopped.stdout
    assert "ended 1 agent CLI(s) a daemon had left running" in stopped.stdout
    until(lambda: group(int(handle["pid"])) == [], 10)
    assert chorus.run("stop").stdout.strip() == "no daemon was running"  # nothing twice


@pytest.fixture
def short_orphans(daemon_with: Callable[..., Daemon]) -> Iterator[Daemon]:
    daemon = daemon_with("orphan_timeout_s = 3")
    yield daemon
    stop_daemon()


def test_a_body_left_with_no_daemon_ends_itself_and_its_job_resumes(
    short_orphans: Daemon,
) -> None:
    chorus = short_orphans
    job_id, handle = _start_slow_job(chorus, text("resumed after the orphan ended"))
    kill_daemon()
    assert same_process(handle)
    until(lambda: group(int(handle["pid"])) == [], 30)  # 3 s with no daemon, then ended
    said = (Path(handle["run_dir"]) / "stderr").read_text()
    assert "no owner for 3s; the body was ended" in said
    watched = chorus.run("watch", job_id, timeout=180)  # a new daemon: the body is gone
    assert watched.returncode == 0, watched.stdout[-2000:] + watched.stderr[-2000:]
    assert "resumed after the orphan ended" in watched.stdout
    assert chorus.client.job(job_id)["state"] == "succeeded"
