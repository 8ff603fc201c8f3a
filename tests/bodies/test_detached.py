"""The detached transport against small real processes: stdio through files and a
FIFO, the exit status from the wrapper, re-attach by offset from a new transport."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from chorus import BodyCrashedError, BodyTimeoutError
from chorus.bodies import SpawnSpec, _detached
from chorus.bodies._detached import (
    BodyHandle,
    DetachedTransport,
    end_detached,
    replay_lines,
    start_time,
    stdout_before,
)
from tests._procs import alive

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


async def test_replay_lines_interleaves_our_writes_in_stdout_order(tmp_path: Path) -> None:
    transport = DetachedTransport(_spec(tmp_path, ECHO), tmp_path / "run")
    await transport.start()
    lines = transport.lines()
    await transport.write_line("one")
    assert await anext(lines) == "got one"
    await transport.write_line("two")
    assert await anext(lines) == "got two"
    first_end = len(b"got one\n")
    before, later = replay_lines(transport.run_dir, first_end)
    assert before == [("stdin", "one"), ("stdout", "got one")]
    assert later == [(first_end, "two")]  # written once stdout had reached the offset
    everything, rest = replay_lines(transport.run_dir, transport.offset)
    assert everything == [
        ("stdin", "one"),
        ("stdout", "got one"),
        ("stdin", "two"),
        ("stdout", "got two"),
    ]
    assert rest == []
    await lines.aclose()
    await transport.close()


async def test_stored_output_is_erased_past_the_head_and_skipped_by_a_rebuild(
    tmp_path: Path,
) -> None:
    code = "import sys\nfor l in sys.stdin: print(l.strip() * 100, flush=True)"
    transport = DetachedTransport(_spec(tmp_path, code), tmp_path / "run")
    await transport.start()
    lines = transport.lines()
    await transport.write_line("h")
    await anext(lines)
    head = transport.offset
    transport.discard_before(head)  # the first call only marks the kept head
    for n in range(200):
        await transport.write_line(f"x{n % 10}")
        await anext(lines)
    out = transport.run_dir / "stdout"
    used = out.stat().st_blocks * 512
    transport.discard_before(transport.offset)
    assert out.stat().st_blocks * 512 <= used // 4  # the disk space went
    assert out.stat().st_size >= transport.offset  # no offset moved
    kept = stdout_before(transport.run_dir, transport.offset)
    assert kept[0] == "h" * 100  # the head survives whole
    assert all("\0" not in line for line in kept)  # a cut line is never handed out
    assert len(kept) == 1  # every stored line is gone from the disk, not just most
    assert b"x5" not in out.read_bytes()[: transport.offset]  # nothing printed stays
    await lines.aclose()
    await transport.close()


@pytest.mark.parametrize("how", ["truncated", "removed", "replaced"])
async def test_output_lost_under_the_reader_ends_the_body_and_says_why(
    tmp_path: Path, how: str
) -> None:
    transport = DetachedTransport(_spec(tmp_path, ECHO), tmp_path / "run")
    await transport.start()
    lines = transport.lines()
    await transport.write_line("one")
    assert await anext(lines) == "got one"
    out = transport.run_dir / "stdout"
    if how == "truncated":
        out.write_bytes(b"")
    elif how == "removed":
        out.unlink()
    else:
        out.unlink()
        out.write_bytes(b"got one\n")
    assert [line async for line in lines] == []  # the stream ends instead of hanging
    assert await transport.wait(5) is None  # killed: the wrapper had no time to write
    assert how in transport.stderr_tail or "removed" in transport.stderr_tail
    assert not transport.running
    await transport.close()


#: A CLI that starts a child holding stdout (as Codex's launcher starts the native
#: app-server), says so, and dies by SIGKILL at its first input line.
LAUNCHER = (
    "import os, signal, subprocess, sys\n"
    "p = subprocess.Popen(['sleep', '60'])\n"
    "print(p.pid, flush=True)\n"
    "sys.stdin.readline()\n"
    "os.kill(os.getpid(), signal.SIGKILL)"
)


async def _gone(pid: int, within: float = 5.0) -> bool:
    deadline = time.monotonic() + within
    for _ in range(int(within / 0.05)):
        if not alive(pid) or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.05)
    return not alive(pid)


async def test_what_a_dead_cli_left_in_its_group_is_ended_before_its_end_is_read(
    tmp_path: Path,
) -> None:
    transport = DetachedTransport(_spec(tmp_path, LAUNCHER), tmp_path / "run")
    await transport.start()
    lines = transport.lines()
    child = int(await anext(lines))
    await transport.write_line("die")
    try:
        assert [line async for line in lines] == []
        # Killed when the reader saw the end (its death may take a moment to show).
        assert await _gone(child, within=2.0)
        assert await transport.wait(5) == 128 + signal.SIGKILL
    finally:
        await transport.close()


async def test_with_nobody_reading_the_wrapper_itself_ends_the_group(tmp_path: Path) -> None:
    transport = DetachedTransport(_spec(tmp_path, LAUNCHER), tmp_path / "run")
    await transport.start()
    lines = transport.lines()
    child = int(await anext(lines))
    await lines.aclose()
    await transport.write_line("die")
    handle = await transport.detach()  # as a daemon killed with SIGKILL leaves it
    assert await _gone(child)
    assert await _gone(handle.pid)
    assert (handle.run_dir / "exit").read_text().strip() == str(128 + signal.SIGKILL)


#: Starts a detached body whose owner is this short-lived process, prints its handle
#: and exits without closing it (as a daemon killed with SIGKILL leaves its bodies).
OWNER = """
import asyncio, json, sys
from pathlib import Path
from chorus.bodies import SpawnSpec, _detached
from chorus.bodies._detached import DetachedTransport

async def main():
    spec = SpawnSpec(argv=[sys.executable, "-c", {code!r}], cwd=Path({cwd!r}),
                     env={{"PATH": "/usr/bin:/bin"}}, orphan_timeout={timeout})
    transport = DetachedTransport(spec, Path({run!r}))
    await transport.start()
    print(json.dumps((await transport.detach()).as_dict()))

asyncio.run(main())
"""


def _orphan(tmp_path: Path, timeout: float) -> BodyHandle:
    """A body started by a process that is gone now."""
    script = OWNER.format(code=ECHO, cwd=str(tmp_path), timeout=timeout, run=str(tmp_path / "run"))
    done = subprocess.run([PY, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return BodyHandle.from_dict(json.loads(done.stdout))


async def test_a_body_with_no_owner_ends_itself_after_the_orphan_timeout(tmp_path: Path) -> None:
    handle = _orphan(tmp_path, 2)
    assert start_time(handle.pid) == handle.started  # outlived its owner
    assert await _gone(handle.pid, within=15)
    said = (handle.run_dir / "stderr").read_text()
    assert "chorus: no owner for 2s; the body was ended" in said
    assert (handle.run_dir / "exit").read_text().strip() == str(128 + signal.SIGTERM)


async def test_a_body_re_attached_in_time_lives_on_past_the_orphan_timeout(
    tmp_path: Path,
) -> None:
    handle = _orphan(tmp_path, 2)
    again = await DetachedTransport.attach(_spec(tmp_path, ECHO), handle)  # the new owner
    await asyncio.sleep(5)
    assert again.running
    lines = again.lines()
    await again.write_line("still here")
    assert await anext(lines) == "got still here"
    await lines.aclose()
    await again.close()


def test_end_detached_ends_a_body_left_running_and_never_a_reused_pid(tmp_path: Path) -> None:
    handle = _orphan(tmp_path, 0)  # no orphan watch: it would wait forever
    (handle.run_dir / "pid").write_text(json.dumps({"pid": os.getpid(), "started": 1}))
    assert not end_detached(handle.run_dir)  # our pid, another start time: not its group
    (handle.run_dir / "pid").write_text(json.dumps({"pid": handle.pid, "started": handle.started}))
    assert end_detached(handle.run_dir)
    assert asyncio.run(_gone(handle.pid))
    assert not end_detached(handle.run_dir)  # nothing left to end


def _slow_wrapper(monkeypatch: pytest.MonkeyPatch, seconds: float) -> None:
    """A fake of a loaded machine: the wrapper takes ``seconds`` before it opens the
    stdin pipe (a real one cannot be made slow on demand)."""
    monkeypatch.setattr(_detached, "_WRAPPER", f"sleep {seconds}; {_detached._WRAPPER}")


async def test_a_slow_wrapper_is_waited_for_while_it_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _slow_wrapper(monkeypatch, 6)  # longer than the fixed 5 s the start once allowed
    spec = replace(_spec(tmp_path, ECHO), start_timeout=30)
    transport = DetachedTransport(spec, tmp_path / "run")
    await transport.start()
    lines = transport.lines()
    await transport.write_line("late")
    assert await anext(lines) == "got late"
    await lines.aclose()
    await transport.close()


async def test_a_wrapper_stuck_past_the_deadline_is_tried_twice_then_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _slow_wrapper(monkeypatch, 60)
    transport = DetachedTransport(replace(_spec(tmp_path, ECHO), start_timeout=1), tmp_path / "run")
    started = time.monotonic()
    with pytest.raises(
        BodyTimeoutError, match=r"stdin pipe was not opened within 1s \(step: stdin"
    ):
        await transport.start()
    assert 2 <= time.monotonic() - started < 10  # one try more, not more
    assert transport.pid is not None
    assert await _gone(transport.pid)  # the stuck one is not left behind


async def test_a_cli_that_died_at_start_fails_the_first_write_with_its_stderr(
    tmp_path: Path,
) -> None:
    spec = SpawnSpec(
        argv=["/bin/sh", "-c", "echo 'boom: broken install' >&2; exit 3"],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin"},
    )
    transport = DetachedTransport(spec, tmp_path / "run")
    await transport.start()  # whether or not it could open the pipe first
    assert await transport.wait(10) == 3
    with pytest.raises(BodyCrashedError) as info:
        await transport.write_line("{}")
    assert info.value.exit_code == 3
    assert "boom: broken install" in info.value.stderr_tail
    await transport.close()


async def test_a_cli_that_ends_between_the_check_and_the_write_is_a_crash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a loaded machine the CLI can end after ``write_line`` saw it running and
    before its write: the FIFO has no reader then (EPIPE), which is a crash with the
    CLI's status, never a bare ``BrokenPipeError`` (a job failed as ``unknown``)."""
    spec = SpawnSpec(
        argv=["/bin/sh", "-c", "read line; echo 'boom: gone' >&2; exit 3"],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin"},
    )
    transport = DetachedTransport(spec, tmp_path / "run")
    await transport.start()
    await transport.write_line("first")  # read: the CLI ends
    assert await transport.wait(60) == 3
    pid = transport.pid
    assert pid is not None
    assert await _gone(pid, within=60)  # the wrapper too: nobody reads the FIFO
    monkeypatch.setattr(DetachedTransport, "running", property(lambda self: True))
    with pytest.raises(BodyCrashedError) as info:
        await transport.write_line("{}")
    assert info.value.exit_code == 3
    assert "boom: gone" in info.value.stderr_tail
    await transport.close()


def test_a_line_goes_into_a_pipe_with_room_at_once_and_never_blocks_on_a_full_one() -> None:
    """The writer's fast path: a short line is written on the spot when the pipe has a
    free page; into a full pipe nothing is written (the thread path waits instead)."""
    from chorus.bodies._detached import _written_now

    read, write = os.pipe()
    try:
        assert _written_now(write, b'{"type":"user"}\n')
        assert os.read(read, 100) == b'{"type":"user"}\n'
        os.set_blocking(write, False)
        with contextlib.suppress(BlockingIOError):
            while True:
                os.write(write, b"x" * 4096)
        os.set_blocking(write, True)
        assert not _written_now(write, b"more\n")  # returns at once: the pipe is full
        assert not _written_now(write, b"y" * (select.PIPE_BUF + 1))  # too long for one write
    finally:
        os.close(read)
        os.close(write)
