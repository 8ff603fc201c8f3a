"""Which process a pid names: its start time (Linux), read from ``/proc``.

A pid with the start time recorded when it was spawned names that very process; a
pid reused since names another, and is never signalled."""

from __future__ import annotations

from pathlib import Path


def start_time(pid: int, *, zombies: bool = True) -> int | None:
    """When process ``pid`` started, in clock ticks since boot (``/proc/<pid>/stat``
    field 22); None when there is no such process, or, with ``zombies`` false, when
    it has ended and only waits to be reaped."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    if len(fields) <= 19 or (not zombies and fields[0] == "Z"):
        return None
    return int(fields[19])
