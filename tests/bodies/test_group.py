"""Ending a sandboxed body: its CLI gets the signal and finishes its own cleanup; the
sandbox around it (bubblewrap, which does not forward signals and dies at once) is
spared, or the body's group would be SIGKILLed in the middle of that cleanup.

The fake agent below stands in for Gemini holding its ``projects.json.lock`` (a real
CLI cannot be made to hold a lock at a chosen instant): on TERM or INT it takes
0.3 s, then writes a marker and exits."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from chorus.bodies import ProcessTransport, SpawnSpec
from chorus.bodies._body import interrupt_group, terminate_group_until
from chorus.bodies._detached import DetachedTransport, end_detached
from chorus.bodies._group import is_sandbox, members, signal_members
from chorus.bodies._transport import AgentTransport
from chorus.policy import Policy
from chorus.sandbox import bwrap_path, layout, write_wrapper
from tests._procs import alive
from tests._wait import until_async

PY = sys.executable
#: Prints "ready" once its handlers are set; on TERM/INT: 0.3 s of cleanup, the marker.
AGENT = """
import signal, sys, time
def bye(sig, frame):
    time.sleep(0.3)
    open("cleaned", "w").write(str(sig))
    sys.exit(0)
signal.signal(signal.SIGTERM, bye)
signal.signal(signal.SIGINT, bye)
print("ready", flush=True)
while True:
    time.sleep(1)
"""
#: Ignores TERM and INT: still ended, by the SIGKILL after the grace.
STUBBORN = """
import signal, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
signal.signal(signal.SIGINT, signal.SIG_IGN)
print("ready", flush=True)
while True:
    time.sleep(1)
"""

needs_bwrap = pytest.mark.skipif(bwrap_path() is None, reason="bubblewrap is not installed")


def _sandboxed(tmp_path: Path, code: str) -> tuple[SpawnSpec, Path]:
    """The fake agent as a body runs it: through the sandbox's wrapper script, inside
    bubblewrap, in a folder of its own (writable there)."""
    work, chorus_home = tmp_path / "work", tmp_path / "ch"
    work.mkdir()
    chorus_home.mkdir()
    bwrap = bwrap_path()
    assert bwrap is not None
    box = layout(Policy(), work, {"HOME": str(tmp_path)}, chorus_home)
    wrapper = write_wrapper(tmp_path / "box.sh", bwrap, box, Path(PY))
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    return SpawnSpec(argv=[str(wrapper), "-c", code], cwd=work, env=env), work


async def _started(transport: AgentTransport) -> None:
    """Start the fake agent and wait until it says it is ready."""
    await transport.start()
    lines = transport.lines()
    assert await asyncio.wait_for(anext(lines), 30) == "ready"


def _cli_pid(pgid: int) -> int:
    """The group's member that runs Python (the fake agent, inside bubblewrap)."""
    python = os.stat(PY)
    found = [p for p in members(pgid) or [] if _runs(p, python)]
    assert len(found) == 1, found
    return found[0]


@needs_bwrap
async def test_closing_a_detached_body_lets_its_cli_finish_its_cleanup(tmp_path: Path) -> None:
    spec, work = _sandboxed(tmp_path, AGENT)
    transport = DetachedTransport(spec, tmp_path / "run")
    await _started(transport)
    assert await transport.close() == 0  # the CLI's own exit, through bubblewrap
    assert (work / "cleaned").read_text() == str(int(signal.SIGTERM))


@needs_bwrap
async def test_closing_a_piped_body_lets_its_cli_finish_its_cleanup(tmp_path: Path) -> None:
    spec, work = _sandboxed(tmp_path, AGENT)
    transport = ProcessTransport(spec)
    await _started(transport)
    assert await transport.close(grace=0.1) == 0
    assert (work / "cleaned").read_text() == str(int(signal.SIGTERM))


@needs_bwrap
@pytest.mark.parametrize("detached", [True, False])
async def test_the_interrupts_escalation_lets_the_cli_finish_its_cleanup(
    tmp_path: Path, detached: bool
) -> None:
    """The escalation of a turn's interrupt (SIGTERM, then SIGKILL); and the one-shot
    bodies' interrupt (SIGINT first), which bubblewrap would die of just the same."""
    spec, work = _sandboxed(tmp_path, AGENT)
    transport: AgentTransport = (
        DetachedTransport(spec, tmp_path / "run") if detached else ProcessTransport(spec)
    )
    await _started(transport)
    done = asyncio.Event()
    ended = asyncio.create_task(transport.wait())
    ended.add_done_callback(lambda _: done.set())
    await terminate_group_until(transport, done, 5.0)
    assert (work / "cleaned").read_text() == str(int(signal.SIGTERM))
    await transport.close()


@needs_bwrap
async def test_a_one_shot_interrupt_reaches_the_cli_inside_the_sandbox(tmp_path: Path) -> None:
    spec, work = _sandboxed(tmp_path, AGENT)
    transport = ProcessTransport(spec)
    await _started(transport)
    turn = asyncio.create_task(transport.wait())
    await interrupt_group(turn, transport, 5.0)
    assert turn.result() == 0
    assert (work / "cleaned").read_text() == str(int(signal.SIGINT))
    await transport.close()


@needs_bwrap
async def test_end_detached_lets_the_cli_finish_its_cleanup(tmp_path: Path) -> None:
    """``chorus stop`` with no daemon: the body's group ended from its pid file."""
    spec, work = _sandboxed(tmp_path, AGENT)
    transport = DetachedTransport(spec, tmp_path / "run")
    await _started(transport)
    await transport.detach()
    assert await asyncio.to_thread(end_detached, tmp_path / "run")
    assert (work / "cleaned").read_text() == str(int(signal.SIGTERM))
    await transport.close()


@needs_bwrap
async def test_a_body_with_no_owner_lets_its_cli_finish_its_cleanup(tmp_path: Path) -> None:
    """The wrapper's orphan watch ends a body no process reads (its owner gone) the
    same way: TERM to the CLI, not to its sandbox."""
    spec, work = _sandboxed(tmp_path, AGENT)
    transport = DetachedTransport(replace(spec, orphan_timeout=1), tmp_path / "run")
    await _started(transport)
    (tmp_path / "run" / "owner").write_text("")  # as if its owner were gone
    assert await transport.wait(20) == 0
    assert (work / "cleaned").read_text() == str(int(signal.SIGTERM))
    assert "no owner for 1s" in (tmp_path / "run" / "stderr").read_text()
    await transport.close()


@needs_bwrap
@pytest.mark.parametrize("detached", [True, False])
async def test_a_cli_that_ignores_term_is_still_killed(tmp_path: Path, detached: bool) -> None:
    spec, _ = _sandboxed(tmp_path, STUBBORN)
    transport: AgentTransport = (
        DetachedTransport(spec, tmp_path / "run") if detached else ProcessTransport(spec)
    )
    await _started(transport)
    assert transport.pid is not None
    pgid, cli = transport.pid, _cli_pid(transport.pid)
    assert await transport.close(grace=0.1, term_wait=0.5) != 0  # None: the wrapper too
    await until_async(lambda: not Path(f"/proc/{cli}").exists(), 5)
    await until_async(lambda: not [p for p in members(pgid) or [] if alive(p)], 5)


@needs_bwrap
async def test_only_the_sandbox_and_the_wrapper_are_spared(tmp_path: Path) -> None:
    """The group of a detached body: the wrapper (leader), the sandbox (outer
    bubblewrap and its namespace's init) and the CLI; only the CLI is signalled."""
    spec, _ = _sandboxed(tmp_path, STUBBORN)
    transport = DetachedTransport(spec, tmp_path / "run")
    await _started(transport)
    assert transport.pid is not None
    pgid = transport.pid
    group = members(pgid) or []
    assert sum(is_sandbox(p) for p in group) == 2, group
    cli = _cli_pid(pgid)
    assert not is_sandbox(cli)
    assert signal_members(pgid, signal.SIGSTOP, spare=(pgid,))
    await until_async(lambda: _state(cli) == "T", 5)
    assert all(_state(p) != "T" for p in group if p != cli)
    os.kill(cli, signal.SIGCONT)
    await transport.close(grace=0.1, term_wait=0.5)


def _runs(pid: int, program: os.stat_result) -> bool:
    try:
        return os.path.samestat(os.stat(f"/proc/{pid}/exe"), program)
    except OSError:
        return False


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def test_a_process_calling_itself_bwrap_only_spares_itself_the_term(tmp_path: Path) -> None:
    """A CLI can name itself ``bwrap`` (prctl): it is not taken for the sandbox, whose
    binary it does not run; and were it spared, it would only be SIGKILLed later."""
    code = (  # prctl(PR_SET_NAME, "bwrap")
        "import ctypes, time\nctypes.CDLL(None).prctl(15, b'bwrap')\n"
        "print(1, flush=True)\ntime.sleep(30)"
    )
    with subprocess.Popen([PY, "-c", code], stdout=subprocess.PIPE) as proc:
        assert proc.stdout is not None
        proc.stdout.readline()
        assert Path(f"/proc/{proc.pid}/comm").read_text().strip() == "bwrap"
        assert not is_sandbox(proc.pid)
        proc.kill()


def test_a_group_that_cannot_be_listed_is_signalled_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No ``/proc`` (macOS, a locked-down mount): the whole group gets the signal."""
    with subprocess.Popen(["sleep", "30"], start_new_session=True) as proc:
        monkeypatch.setattr("chorus.bodies._group._PROC", Path("/no/such/proc"))
        assert members(proc.pid) is None
        assert signal_members(proc.pid, signal.SIGTERM)
        assert proc.wait(5) == -signal.SIGTERM
