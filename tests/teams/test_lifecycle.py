"""Stopping a member: shutdown request, deadline, SIGTERM, SIGKILL, by process group
only, each step noted; a reused pid (another start time) is never signalled."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess

from chorus.session import start_time
from chorus.teams import StopPort, signal_group, stop_member


class _Port(StopPort):
    def __init__(self, proc: subprocess.Popen[bytes], *, obeys_request: bool) -> None:
        self.proc = proc
        self.obeys = obeys_request
        self.notes: list[str] = []

    async def request(self, job_id: str) -> None:
        if self.obeys:  # the member takes the request and ends (its turn is interrupted)
            os.killpg(self.proc.pid, signal.SIGKILL)

    async def note(self, job_id: str, message: str) -> None:
        self.notes.append(message)

    async def wait(self, job_id: str, seconds: float) -> bool:
        try:
            await asyncio.to_thread(self.proc.wait, seconds)
        except subprocess.TimeoutExpired:
            return False
        return True

    async def pgid(self, job_id: str) -> tuple[int, int | None] | None:
        return self.proc.pid, start_time(self.proc.pid)


def _group(script: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(["sh", "-c", script], start_new_session=True)


STEPS = (("shutdown_request", 1.0), ("sigterm", 1.0), ("sigkill", 5.0))


async def test_a_member_that_obeys_stops_at_the_request() -> None:
    proc = _group("sleep 30")
    port = _Port(proc, obeys_request=True)
    patient = (("shutdown_request", 15.0), *STEPS[1:])  # a loaded machine may be slow
    assert await stop_member(port, "j", patient) == ["shutdown_request"]
    assert port.notes[-1] == "team shutdown: the member stopped after shutdown_request"


async def test_a_member_ignoring_term_is_killed_step_by_step() -> None:
    proc = _group("trap '' TERM; while :; do sleep 0.1; done")
    await asyncio.sleep(0.2)  # let the trap be set
    port = _Port(proc, obeys_request=False)
    assert await stop_member(port, "j", STEPS) == ["shutdown_request", "sigterm", "sigkill"]
    assert proc.returncode == -signal.SIGKILL
    assert [n.split(" (")[0] for n in port.notes[:3]] == [
        "team shutdown: shutdown_request",
        "team shutdown: sigterm",
        "team shutdown: sigkill",
    ]


def test_a_group_whose_start_time_changed_is_left_alone() -> None:
    proc = _group("sleep 30")
    try:
        started = start_time(proc.pid)
        assert started is not None
        assert not signal_group(proc.pid, started + 1, signal.SIGKILL)
        assert proc.poll() is None
        assert signal_group(proc.pid, started, signal.SIGKILL)
        assert proc.wait(5) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
