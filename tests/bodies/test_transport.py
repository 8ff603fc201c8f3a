"""The shared process transport, against small real processes."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from chorus import BodyCrashedError
from chorus.bodies import ProcessTransport, SpawnSpec

PY = sys.executable


def _alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def _spec(tmp_path: Path, code: str, **kw: object) -> SpawnSpec:
    return SpawnSpec(argv=[PY, "-c", code], cwd=tmp_path, env={"PATH": "/usr/bin:/bin"}, **kw)  # type: ignore[arg-type]


async def test_echo_round_trip_and_raw_tap(tmp_path: Path) -> None:
    seen: list[tuple[str, str]] = []
    code = "import sys\nfor l in sys.stdin: print('got ' + l.strip(), flush=True)"
    transport = ProcessTransport(
        _spec(tmp_path, code), tap=lambda stream, line: seen.append((stream, line))
    )
    await transport.start()
    await transport.write_line('{"x":1}')
    lines = transport.lines()
    assert await anext(lines) == 'got {"x":1}'
    assert await transport.close() == 0
    assert ("stdin", '{"x":1}') in seen
    assert ("stdout", 'got {"x":1}') in seen


async def test_stderr_tail_is_bounded(tmp_path: Path) -> None:
    code = "import sys\nfor i in range(500): print(f'err {i}', file=sys.stderr)"
    transport = ProcessTransport(_spec(tmp_path, code, stderr_tail_lines=10))
    await transport.start()
    assert [line async for line in transport.lines()] == []
    await transport.wait(10)
    tail = transport.stderr_tail.splitlines()
    assert tail == [f"err {i}" for i in range(490, 500)]


async def test_oversized_line_is_dropped_and_counted(tmp_path: Path) -> None:
    code = "print('x' * 5000); print('small')"
    transport = ProcessTransport(_spec(tmp_path, code, max_line_bytes=1000))
    await transport.start()
    assert [line async for line in transport.lines()] == ["small"]
    assert transport.oversized_lines == 1
    await transport.close()


async def test_close_escalates_to_sigkill_for_a_process_ignoring_term(tmp_path: Path) -> None:
    code = (
        "import signal, time, sys\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "sys.stdin.close()\n"
        "print('ready', flush=True)\n"
        "time.sleep(60)"
    )
    transport = ProcessTransport(_spec(tmp_path, code))
    await transport.start()
    assert await anext(transport.lines()) == "ready"
    started = time.monotonic()
    code_ = await transport.close(grace=0.2, term_wait=0.3)
    assert code_ == -9
    assert time.monotonic() - started < 10


async def test_close_reaps_grandchildren_in_the_group(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    code = (
        "import subprocess, sys\n"
        f"p = subprocess.Popen(['sleep', '60'])\n"
        f"open({str(pidfile)!r}, 'w').write(str(p.pid))\n"
        "print('ready', flush=True)\n"
        "sys.stdin.read()"
    )
    transport = ProcessTransport(_spec(tmp_path, code))
    await transport.start()
    assert await anext(transport.lines()) == "ready"
    await transport.close(grace=1.0)
    child = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child)


async def test_write_after_exit_raises_body_crashed(tmp_path: Path) -> None:
    transport = ProcessTransport(_spec(tmp_path, "import sys; sys.exit(3)"))
    await transport.start()
    assert await transport.wait(10) == 3
    with pytest.raises(BodyCrashedError) as info:
        await transport.write_line("{}")
    assert info.value.exit_code == 3
    await transport.close()


async def test_spawn_failure_is_body_crashed(tmp_path: Path) -> None:
    spec = SpawnSpec(argv=["/nonexistent/agent"], cwd=tmp_path, env={})
    with pytest.raises(BodyCrashedError, match="could not start"):
        await ProcessTransport(spec).start()


async def test_a_leader_that_dies_takes_what_it_left_in_its_group(tmp_path: Path) -> None:
    # Codex's node launcher killed: its native child keeps stdout open and would hold
    # the session; the transport must end it, and the output must end with it.
    pidfile = tmp_path / "child.pid"
    code = (
        "import os, subprocess, signal\n"
        "p = subprocess.Popen(['sleep', '60'])\n"
        f"open({str(pidfile)!r}, 'w').write(str(p.pid))\n"
        "print('ready', flush=True)\n"
        "os.kill(os.getpid(), signal.SIGKILL)"
    )
    transport = ProcessTransport(_spec(tmp_path, code))
    await transport.start()
    lines = [line async for line in transport.lines()]  # ends: no child holds stdout
    assert lines == ["ready"]
    child = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child)
    assert await transport.close() == -9
