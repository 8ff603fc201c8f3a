"""No process of a body outlives it: a Codex whose ``node`` launcher is killed leaves
no native ``codex app-server`` behind (it would hold the thread, and the resume would
fail "already has an active writer"); the job resumes and succeeds."""

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

if TYPE_CHECKING:
    from conftest import Daemon

pytestmark = pytest.mark.e2e
WORDS = " ".join(f"w{i}" for i in range(40))


def _until(check: Callable[[], bool], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.1)


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


def _group(pgid: int) -> list[tuple[int, str]]:
    """Live (not zombie) processes of process group ``pgid``: (pid, command line)."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            cmdline = (stat.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            out.append((int(stat.parent.name), cmdline))
    return out


def _node_launcher(pgid: int) -> int:
    """The ``node`` process that runs Codex's JavaScript launcher, in ``pgid``."""
    for pid, _ in _group(pgid):
        if os.path.basename(os.readlink(f"/proc/{pid}/exe")).startswith("node"):
            return pid
    raise AssertionError(f"no node launcher in group {pgid}: {_group(pgid)}")


def test_codex_launcher_killed_mid_turn_leaves_no_app_server_and_resumes(
    chorus: Daemon,
) -> None:
    chunks = len(WORDS.split())
    chorus.server.script(
        [slow_text(WORDS, chunks=chunks, delay=0.25), text("resumed after the kill")],
        lane="codex",
    )
    job_id = chorus.run("task", "survive", "--body", "codex").stdout.strip()
    _until(lambda: sum(isinstance(e, TextDelta) for e in _events(chorus, job_id)) >= 3)
    first = _handle(chorus, job_id)
    group = int(first["pid"])
    natives = [pid for pid, cmd in _group(group) if "app-server" in cmd]
    os.kill(_node_launcher(group), signal.SIGKILL)
    watched = chorus.run("watch", job_id, timeout=180)
    assert watched.returncode == 0, watched.stdout[-3000:] + watched.stderr[-3000:]
    assert chorus.client.job(job_id)["state"] == "succeeded"
    assert "resumed after the kill" in watched.stdout
    notes = [e.message for e in _events(chorus, job_id) if isinstance(e, Notice)]
    assert any("body crashed; resuming natively" in n for n in notes), notes
    assert _group(group) == []  # nothing of the killed body is left
    assert natives
    assert not any(Path(f"/proc/{pid}").exists() for pid in natives)
    now = _handle(chorus, job_id)
    assert int(now["pid"]) != group  # a new app-server resumed the thread
    assert chorus.run("stop").returncode == 0
    _until(lambda: _group(int(now["pid"])) == [], 15)
