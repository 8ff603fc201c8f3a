"""Start, find and stop the daemon process.

Exactly one daemon runs per ``CHORUS_HOME``: it holds an exclusive ``flock`` on
the home directory itself for its whole life, so a second one exits at once
(deleting a file cannot release it). The
socket is created with mode 0600 (the file mode is the authentication).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from chorus.config import chorus_home
from chorus.daemon._client import DaemonError, is_responding
from chorus.daemon._paths import log_path, pid_path


def acquire_lock() -> int | None:
    """Take the per-home lock; return its fd, or ``None`` if another daemon holds it.

    The lock is an exclusive ``flock`` on the ``CHORUS_HOME`` directory itself, not on
    a file inside it: deleting ``run/daemon.lock`` (or anything else in the home) does
    not release it, so a second daemon can never run beside the first. It goes with
    the process, however that ends."""
    home = chorus_home()
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(home, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def read_pid() -> int | None:
    try:
        return int(pid_path().read_text().strip())
    except (OSError, ValueError):
        return None


def spawn_daemon(*, wait: float = 20.0) -> int:
    """Start a detached daemon for this ``CHORUS_HOME`` and wait until it answers.

    Idempotent: returns the running daemon's pid if one already answers.
    """
    if is_responding():
        return read_pid() or 0
    log = log_path().open("ab")
    proc = subprocess.Popen(
        [sys.executable, "-m", "chorus.daemon"],
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=log,
        start_new_session=True,
        close_fds=True,
    )
    log.close()
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        if is_responding(0.5):
            return proc.pid
        if proc.poll() is not None and not is_responding(0.5):
            raise DaemonError(f"daemon exited with code {proc.returncode}; see {log_path()}")
        time.sleep(0.05)
    raise DaemonError(f"daemon did not answer within {wait:.0f}s; see {log_path()}")


def stop_daemon(*, wait: float = 15.0) -> bool:
    """SIGTERM the daemon and wait for it to go; SIGKILL after ``wait``. False if none ran."""
    pid = read_pid()
    if pid is None or not _alive(pid):
        return False
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    return True


def end_bodies_left() -> int:
    """End the agent CLIs a daemon left running (killed with SIGKILL, or stopped with
    ``--keep-bodies``) when no daemon runs: each one's process group, as its run
    directory's pid file names it (a pid now another process's is never signalled).
    Holds the daemon lock meanwhile, so none starts and takes them over; with a
    daemon running it does nothing (its bodies are its own). Returns how many."""
    from chorus.bodies import end_detached
    from chorus.config import run_dir
    from chorus.meter import end_meter_left
    from chorus.session import bodies_dir

    lock = acquire_lock()
    if lock is None:
        return 0
    try:
        ended = sum(end_detached(run) for run in sorted(bodies_dir().glob("*")))
        end_meter_left(run_dir())  # the model-API meter they talked through
        return ended
    finally:
        os.close(lock)


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    return stat.rsplit(")", 1)[1].split()[0] != "Z"
