"""Signalling a body's process group, sparing the sandbox around its CLI.

A sandboxed body's group holds the sandbox's own processes too: bubblewrap, and the
init of its PID namespace (a second ``bwrap``). bubblewrap forwards no signal and
dies at once of SIGTERM or SIGINT; its end then ends the whole group with SIGKILL
(the detached wrapper's last step; a piped body's leader is gone). So a CLI sent
SIGTERM with its sandbox would be killed in the middle of its own cleanup (Gemini
leaves its ``projects.json.lock`` behind, and every later start waits for it to go
stale). :func:`signal_members` signals every member but those: the CLI ends, and
its sandbox with it. SIGKILL, and signal 0, go to the whole group.

A sandbox process is one that runs the ``bwrap`` binary (``/proc/PID/exe``, the
file itself, not its name); ``comm`` only where ``exe`` cannot be read (a setuid
bubblewrap). A CLI can only spare itself (by naming itself ``bwrap`` there, or by
running bubblewrap): it is SIGKILLed after the grace like any CLI that ignores
SIGTERM. Each member is signalled through a pidfd, its group checked once that is
open: a pid freed and reused meanwhile is never signalled.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
from collections.abc import Collection
from pathlib import Path

_PROC = Path("/proc")
#: What the whole group always gets: the end, and the check that it exists.
_WHOLE = (signal.SIGKILL, 0)


def signal_members(pgid: int, sig: int, *, spare: Collection[int] = ()) -> bool:
    """Send ``sig`` to the group ``pgid``: to its members but the sandbox's processes
    and ``spare`` (e.g. a wrapper that traps it anyway); to the whole group for
    SIGKILL and 0, and where the group cannot be listed. True when the group has
    members (as ``killpg`` succeeds)."""
    found = None if sig in _WHOLE else members(pgid)
    if found is None:
        return _killpg(pgid, sig)
    bwrap = _bwrap()
    for pid in found:
        if pid not in spare and not is_sandbox(pid, bwrap):
            _signal_member(pid, pgid, sig)
    return bool(found)


def members(pgid: int) -> list[int] | None:
    """The pids in process group ``pgid`` (None: ``/proc`` cannot be listed)."""
    try:
        pids = [int(name) for name in os.listdir(_PROC) if name.isdigit()]
    except OSError:
        return None
    return [pid for pid in pids if _group_of(pid) == pgid]


def is_sandbox(pid: int, bwrap: os.stat_result | None = None) -> bool:
    """``pid`` runs the bubblewrap binary ``bwrap`` (default: the one on PATH); see
    the module's notes."""
    bwrap = bwrap or _bwrap()
    try:
        exe = os.stat(_PROC / str(pid) / "exe")
    except PermissionError:
        return _comm(pid) == "bwrap"
    except OSError:
        return False
    return bwrap is not None and os.path.samestat(exe, bwrap)


def _bwrap() -> os.stat_result | None:
    """The bubblewrap binary on PATH (None: none)."""
    binary = shutil.which("bwrap")
    try:
        return os.stat(binary) if binary is not None else None
    except OSError:
        return None


def _comm(pid: int) -> str | None:
    try:
        return (_PROC / str(pid) / "comm").read_text().strip()
    except OSError:
        return None


def _group_of(pid: int) -> int | None:
    """The process group of ``pid`` (``/proc/PID/stat`` field 5); None when gone."""
    try:
        stat = (_PROC / str(pid) / "stat").read_text()
        return int(stat.rsplit(")", 1)[1].split()[2])
    except (OSError, ValueError, IndexError):
        return None


def _signal_member(pid: int, pgid: int, sig: int) -> None:
    """Signal ``pid`` if it is (still) in ``pgid``: through a pidfd opened before the
    check, so a process that ended meanwhile is not confused with a new one."""
    try:
        fd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        fd = None
    try:
        if _group_of(pid) == pgid:
            _send(fd, pid, sig)
    finally:
        if fd is not None:
            os.close(fd)


def _send(fd: int | None, pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if fd is not None:
            signal.pidfd_send_signal(fd, sig)
        else:
            os.kill(pid, sig)


def _killpg(pgid: int, sig: int) -> bool:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True
