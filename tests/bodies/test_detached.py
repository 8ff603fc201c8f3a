"""The detached transport against small real processes: stdio through files and a
FIFO, the exit status from the wrapper, re-attach by offset from a new transport."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest

from chorus import BodyCrashedError
from chorus.bodies import SpawnSpec
from chorus.bodies._detached import BodyHandle, DetachedTransport, start_time

PY = sys.executable
ECHO = "import sys\nfor l in sys.stdin: print('got ' + l.strip(), flush=True)"


def _spec(tmp_path: Path, code: str) -> SpawnSpec:
    return SpawnSpec(argv=[PY, "-c", code], cwd=tmp_path, env={"PATH": "/usr/bin:/bin"})


async def test_round_trip_detach_and_reattach_by_offset(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    seen: list[tuple[str, str]] = []
    first = DetachedTransport(
        _spec(tmp_path, ECHO), run_dir, lambda s, line: seen.append((s, line))
    )
    await first.start()
    await first.write_line("one")
    await first.write_line("two")
    lines = first.lines()  # an async generator: closed below
    assert await anext(lines) == "got one"
    handle = await first.detach()  # the owner goes; the process stays
    await lines.aclose()
    assert handle.offset == len(b"got one\n")
    assert start_time(handle.pid) == handle.started
    assert ("stdin", "one") in seen
    second = await DetachedTransport.attach(
        _spec(tmp_path, ECHO), BodyHandle.from_dict(handle.as_dict())
    )
    more = second.lines()
    assert await anext(more) == "got two"  # not "got one" again
    await second.write_line("three")  # stdin never saw EOF while nobody held it
    assert await anext(more) == "got three"
    assert second.running
    code = await second.close()
    assert code == 128 + signal.SIGTERM  # the wrapper recorded the CLI's status
    assert not run_dir.exists()


async def test_exit_status_is_recorded_and_output_drained(tmp_path: Path) -> None:
    code = "print('a'); print('b', flush=True); raise SystemExit(7)"
    transport = DetachedTransport(_spec(tmp_path, code), tmp_path / "run")
    await transport.start()
    assert [line async for line in transport.lines()] == ["a", "b"]
    assert await transport.wait(5) == 7
    assert transport.returncode == 7
    assert not transport.running
    await transport.close()


async def test_a_reused_pid_is_never_taken_for_ours(tmp_path: Path) -> None:
    transport = DetachedTransport(_spec(tmp_path, ECHO), tmp_path / "run")
    await transport.start()
    handle = await transport.detach()
    other = BodyHandle(handle.run_dir, os.getpid(), start_time(os.getpid()) or 0 + 1)
    with pytest.raises(BodyCrashedError, match="gone"):
        await DetachedTransport.attach(
            _spec(tmp_path, ECHO), BodyHandle(other.run_dir, other.pid, 1)
        )
    again = await DetachedTransport.attach(_spec(tmp_path, ECHO), handle)
    await again.close()
