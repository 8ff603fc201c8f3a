"""The real ``gemini`` CLI, sandboxed as the daemon starts it, closed while it holds
the lock it takes on its project registry as it starts (``~/.gemini/projects.json.lock``,
a folder, held for a few to tens of milliseconds at a time): it is sent SIGTERM inside
bubblewrap and finishes its own cleanup, so the lock is never left behind. A lock left
behind made every later start wait about 14 s for it to go stale."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from chorus.bodies import BodyOptions
from chorus.bodies.gemini import GeminiAcpBody
from chorus.policy import Policy
from chorus.sandbox import bwrap_path, layout, write_wrapper
from chorus.testing import GEMINI_MODEL, OfflineCli

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(bwrap_path() is None, reason="bubblewrap is not installed"),
]
ROUNDS = 4
#: How long a lock must have been there to count as taken (see :func:`_held`).
SETTLE = 0.01


def _options(cli: OfflineCli, tmp_path: Path, n: int) -> BodyOptions:
    """A detached body whose CLI runs inside its sandbox, as the daemon's launcher
    builds it (the CLI's state folder, ``~/.gemini``, writable)."""
    bwrap = bwrap_path()
    assert bwrap is not None
    box = layout(Policy(), cli.cwd, cli.env, tmp_path / "ch", cli="gemini")
    wrapper = write_wrapper(tmp_path / "box.sh", bwrap, box, cli.executable)
    return BodyOptions(
        cwd=cli.cwd,
        env=cli.env,
        executable=wrapper,
        model=GEMINI_MODEL,
        run_dir=tmp_path / f"run-{n}",
        extra={"os_sandbox": True},
    )


async def _close_once_locked(body: GeminiAcpBody, lock: Path) -> bool:
    """Start ``body``; close it while its CLI holds ``lock`` (True), or once started
    if no hold lasted :data:`SETTLE` (False)."""
    start = asyncio.create_task(body.start())
    held = False
    while not start.done() and not held:
        held = await _held(lock)
    await body.close()
    with contextlib.suppress(Exception):  # a start cut short fails: that is the point
        await start
    return held


async def _held(lock: Path) -> bool:
    """``lock`` exists, and the same one (not the next of Gemini's takes) still does
    :data:`SETTLE` later: Gemini has taken it (proper-lockfile knows its lock, and
    removes it as the process ends, only once its ``mkdir`` has returned; a signal in
    between leaves it whatever we do)."""
    await asyncio.sleep(0.001)
    first = _identity(lock)
    if first is None:
        return False
    await asyncio.sleep(SETTLE)
    return _identity(lock) == first


def _identity(lock: Path) -> tuple[int, int] | None:
    """Which take of the lock this is (its folder's inode and change time), or None."""
    try:
        found = lock.stat()
    except FileNotFoundError:
        return None
    return found.st_ino, found.st_ctime_ns


async def test_a_gemini_closed_while_it_holds_its_lock_leaves_no_lock(
    offline_cli: Callable[..., OfflineCli], tmp_path: Path
) -> None:
    cli = offline_cli("gemini")
    (tmp_path / "ch").mkdir()
    lock = cli.home / ".gemini" / "projects.json.lock"
    held, left = 0, 0
    for n in range(ROUNDS):
        held += await _close_once_locked(GeminiAcpBody(_options(cli, tmp_path, n)), lock)
        left += lock.exists()
        shutil.rmtree(lock, ignore_errors=True)  # each round on its own
    assert held >= 1, "the lock was never seen held: nothing was tested"
    assert left == 0, f"the lock was left behind {left} times of {ROUNDS}"
