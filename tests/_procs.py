"""Processes as ``/proc`` shows them, for the tests that kill daemons and bodies:
is a process alive (a zombie is not), which processes are in a group, is a body's
stored handle still the same process, and a daemon killed with SIGKILL."""

from __future__ import annotations

import contextlib
import json
import os
import signal
from pathlib import Path
from typing import Any

from chorus.bodies import process_start_time
from chorus.client._lifecycle import read_pid
from tests._wait import until

__all__ = [
    "alive",
    "end_bodies_left",
    "ended",
    "group",
    "kill_daemon",
    "same_process",
    "started_at",
]


def _stat(pid: int) -> list[str] | None:
    """The fields of ``/proc/PID/stat`` after the command name; None when gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None


def alive(pid: int) -> bool:
    """The process runs (not gone, not a zombie left for its parent to reap)."""
    fields = _stat(pid)
    return fields is not None and fields[0] != "Z"


def started_at(pid: int) -> str | None:
    """A live process's start time (clock ticks since boot), None when it is gone or
    a zombie: with the pid, it names one process."""
    fields = _stat(pid)
    return None if fields is None or fields[0] == "Z" else fields[19]


def group(pgid: int) -> list[tuple[int, str]]:
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


def same_process(handle: dict[str, Any]) -> bool:
    """A body's stored handle (pid and start time) still names a running process."""
    return bool(process_start_time(int(handle["pid"])) == handle["started"])


def kill_daemon() -> None:
    """SIGKILL this CHORUS_HOME's daemon and wait until it is gone, threads and all."""
    pid = read_pid()
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    until(lambda: ended(pid), 10)


def ended(pid: int) -> bool:
    """No thread of the process is left: it is gone or a zombie whose other threads
    have ended too. Its first thread turns zombie while the others may still be
    exiting, and until the last of them has, the process's files stay open: a killed
    daemon's socket still takes a connection then, and drops it unanswered."""
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return True
    return threads == [str(pid)] and not alive(pid)


def end_bodies_left(home: Path) -> None:
    """Kill the process groups of the bodies a daemon of ``home`` left running (a
    failed test may leave detached bodies)."""
    for pid_file in (home / "run" / "bodies").glob("*/pid"):
        with contextlib.suppress(OSError, ValueError, KeyError):
            left = json.loads(pid_file.read_text())
            if process_start_time(int(left["pid"])) == left["started"]:
                os.killpg(int(left["pid"]), signal.SIGKILL)
