"""Stopping a member: by its process group only (never by a process name), in
steps, each an event in the member's job log::

    shutdown_request --(deadline)--> sigterm --(grace)--> sigkill --> gone

A step is skipped once the job has ended. The process group is the one Chorus
recorded when it started the body, checked against its start time so a pid the
system reused since is never signalled.
"""

from __future__ import annotations

import signal
from abc import ABC, abstractmethod

from chorus.bodies import signal_members
from chorus.session import start_time

#: (step, seconds to wait for the job to end after it); in order.
STEPS: tuple[tuple[str, float], ...] = (
    ("shutdown_request", 10.0),
    ("sigterm", 5.0),
    ("sigkill", 5.0),
)


class StopPort(ABC):
    """What stopping needs from the daemon."""

    @abstractmethod
    async def request(self, job_id: str) -> None:
        """Ask the job to stop (an interrupt of its turn)."""

    @abstractmethod
    async def note(self, job_id: str, message: str) -> None:
        """Append an event to the job's log."""

    @abstractmethod
    async def wait(self, job_id: str, seconds: float) -> bool:
        """True once the job has ended (False: still running after ``seconds``)."""

    @abstractmethod
    async def pgid(self, job_id: str) -> tuple[int, int | None] | None:
        """The job's body process group and its recorded start time (None: none)."""


async def stop_member(
    port: StopPort, job_id: str, steps: tuple[tuple[str, float], ...] = STEPS
) -> list[str]:
    """Take the job through the steps until it has ended; returns the steps taken."""
    taken: list[str] = []
    for step, patience in steps:
        await port.note(job_id, f"team shutdown: {step} (then waiting up to {patience:g}s)")
        await _do(port, job_id, step)
        taken.append(step)
        if await port.wait(job_id, patience):
            await port.note(job_id, f"team shutdown: the member stopped after {step}")
            return taken
    await port.note(job_id, "team shutdown: the member is still running after SIGKILL")
    return taken


async def _do(port: StopPort, job_id: str, step: str) -> None:
    if step == "shutdown_request":
        await port.request(job_id)
        return
    group = await port.pgid(job_id)
    if group is not None:
        signal_group(group[0], group[1], signal.SIGTERM if step == "sigterm" else signal.SIGKILL)


def signal_group(pgid: int, started: int | None, sig: signal.Signals) -> bool:
    """Signal the process group if it is still the one started then; True if sent.
    SIGTERM spares the sandbox around the CLI (which would die of it, and its group
    with it, the CLI SIGKILLed in its cleanup): the CLI's own end ends it."""
    if pgid <= 1 or (started is not None and start_time(pgid) != started):
        return False
    return signal_members(pgid, sig)
