"""Start, find and stop the daemon process.

Exactly one daemon runs per ``CHORUS_HOME``: it holds an exclusive ``flock`` on
the home directory itself for its whole life, so a second one exits at once
(deleting a file cannot release it). The
socket is created with mode 0600 (the file mode is the authentication).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

from chorus._errors import ConfigError
from chorus._procs import start_time
from chorus.client._client import DaemonError, chorus_home, is_responding

#: ``typing`` is not imported at run time: it costs the client's fast path milliseconds.
TYPE_CHECKING = False

if TYPE_CHECKING:
    from typing import Any

#: Set in the environment of a daemon that :func:`spawn_daemon` starts: its output is
#: a pipe back to the starter until it writes :data:`READY` there (see ``_server``).
SPAWNED_ENV = "CHORUS_DAEMON_SPAWNED"
#: Set to ``0`` in the environment of a daemon started for a request already on its
#: way (a job, a read): it skips the warm-up, as that request loads what it needs.
WARM_UP_ENV = "CHORUS_DAEMON_WARM_UP"
READY = b"chorus daemon: ready\n"
#: The line a daemon writes just before :data:`READY`: this prefix, then a JSON object
#: of what its starter says next (the TCP gateway's address or why it is off), so that
#: ``chorus start`` need not ask for them once more.
FACTS = b"chorus daemon: facts "


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
        return int((chorus_home() / "run" / "daemon.pid").read_text().strip())
    except (OSError, ValueError):
        return None


def spawn_daemon(*, wait: float = 20.0, warm_up: bool = True) -> int:
    """Start a detached daemon for this ``CHORUS_HOME`` and wait until it answers
    (:func:`spawn_with_facts`); return its pid."""
    return spawn_with_facts(wait=wait, warm_up=warm_up)[0]


def spawn_with_facts(
    *, wait: float = 20.0, warm_up: bool = True
) -> tuple[int, dict[str, Any] | None]:
    """Start a detached daemon for this ``CHORUS_HOME`` and wait until it answers;
    return its pid and the facts it said with :data:`READY` (None from one already up).

    Idempotent: returns the running daemon's pid if one already answers. The daemon
    says it is ready on a pipe (no polling): until then its output comes back here,
    so a config it refuses raises :class:`ConfigError` with its message (exit 2).
    Once ready it warms up what a first job needs, unless ``warm_up`` is false (a
    request is on its way: the warm-up would only compete with it for the CPU)."""
    if is_responding():
        return read_pid() or 0, None
    read_end, write_end = os.pipe()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "chorus.daemon"],
            stdin=subprocess.DEVNULL,
            stdout=write_end,
            stderr=write_end,
            start_new_session=True,
            close_fds=True,
            env={**os.environ, SPAWNED_ENV: "1", WARM_UP_ENV: "1" if warm_up else "0"},
        )
    finally:
        os.close(write_end)
    deadline = time.monotonic() + wait
    said = _read_until_ready(read_end, deadline)
    if said.endswith(READY):
        return proc.pid, _facts(said)
    return _not_ready(proc, said.decode(errors="replace").strip(), deadline), None


def _facts(said: bytes) -> dict[str, Any] | None:
    """The JSON object on the daemon's :data:`FACTS` line, if it wrote one."""
    for line in said.splitlines():
        if line.startswith(FACTS):
            with contextlib.suppress(ValueError):
                found = json.loads(line.removeprefix(FACTS))
                return found if isinstance(found, dict) else None
    return None


def _read_until_ready(fd: int, deadline: float) -> bytes:
    """What the daemon wrote on its pipe until it said :data:`READY`, closed it (it
    exited, or another daemon holds the home) or ``deadline`` came."""
    said = b""
    try:
        while not said.endswith(READY):
            ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
            chunk = os.read(fd, 65536) if ready else b""
            if not chunk:
                return said
            said += chunk
        return said
    finally:
        os.close(fd)


def _not_ready(proc: subprocess.Popen[bytes], said: str, deadline: float) -> int:
    """The daemon went without saying it was ready: a config it refused (exit 2), the
    home's lock held by a daemon still starting (exit 0: wait for that one), a crash."""
    try:
        code = proc.wait(timeout=max(0.1, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        raise DaemonError(f"the daemon did not get ready in time; see {_log()}") from None
    if code == 2 and said:
        raise ConfigError(said.removeprefix("chorus daemon: "))
    if code == 0:
        return _await_other(deadline)
    tail = f": {said[-1000:]}" if said else ""
    raise DaemonError(f"daemon exited with code {code}{tail}; see {_log()}")


def _await_other(deadline: float) -> int:
    """Another daemon holds this home's lock: wait for it to answer."""
    while time.monotonic() < deadline:
        if is_responding(0.5):
            return read_pid() or 0
        time.sleep(0.05)
    raise DaemonError(f"the daemon did not answer in time; see {_log()}")


def _log() -> Path:
    return chorus_home() / "run" / "daemon.log"


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
    lock = acquire_lock()
    if lock is None:
        return 0
    try:
        return _end_left() if _any_left() else 0
    finally:
        os.close(lock)


def _any_left() -> bool:
    """Whether a body's pid file is there, or the meter's naming its live process
    (else nothing is left to end, and the bodies' and the meter's code need not load)."""
    run = chorus_home() / "run"
    return _meter_alive(run / "meter" / "pid") or any((run / "bodies").glob("*/pid"))


def _meter_alive(pid_file: Path) -> bool:
    """The check ``chorus.meter.end_meter_left`` makes: the pid file's process still
    runs, started when the file says (a pid now another process's does not count)."""
    try:
        data = json.loads(pid_file.read_text())
        pid, started = int(data["pid"]), data["started"]
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return started is not None and start_time(pid, zombies=False) == started


def _end_left() -> int:
    from chorus.bodies import end_detached
    from chorus.config import run_dir
    from chorus.meter import end_meter_left
    from chorus.session import bodies_dir

    ended = sum(end_detached(run) for run in sorted(bodies_dir().glob("*")))
    end_meter_left(run_dir())  # the model-API meter they talked through
    return ended


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
