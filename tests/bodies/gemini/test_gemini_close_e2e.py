"""The real ``gemini`` CLI, sandboxed as the daemon starts it, closed right after its
session starts (as memory extraction closes its one-turn bodies): it is sent SIGTERM
inside bubblewrap and finishes its own cleanup, so the lock it takes on its project
registry while a session starts (``~/.gemini/projects.json.lock``, a folder) is never
left behind; a lock left behind made every later start wait about 14 s for it to go
stale."""

from __future__ import annotations

import time
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


async def test_a_gemini_closed_as_its_session_starts_leaves_no_lock(
    offline_cli: Callable[..., OfflineCli], tmp_path: Path
) -> None:
    cli = offline_cli("gemini")
    (tmp_path / "ch").mkdir()
    lock = cli.home / ".gemini" / "projects.json.lock"
    took: list[float] = []
    for n in range(ROUNDS):
        began = time.monotonic()
        async with GeminiAcpBody(_options(cli, tmp_path, n)) as body:
            assert body.alive
        took.append(time.monotonic() - began)
        assert not lock.exists(), f"round {n}: the lock was left behind ({took})"
    assert (cli.home / ".gemini" / "projects.json").exists()  # it did take the lock
