"""A file's write wakes its reader at once; without a watch the wait is a sleep."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

import pytest

from chorus.bodies import _wake
from chorus.bodies._wake import FileWake

linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify is Linux's")


@linux
async def test_a_write_ends_the_wait_before_its_timeout(tmp_path: Path) -> None:
    path = tmp_path / "stdout"
    path.touch()
    wake = FileWake(path)
    try:
        assert wake.active
        asyncio.get_running_loop().call_later(0.05, path.write_text, "line\n")
        started = time.monotonic()
        await wake.wait(60.0)
        assert time.monotonic() - started < 30.0  # woken, not timed out
        started = time.monotonic()
        await wake.wait(0.05)  # nothing written since: the timeout
        assert time.monotonic() - started >= 0.04
    finally:
        wake.close()


@linux
async def test_watches_share_one_instance_closed_with_the_last(tmp_path: Path) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    one.touch()
    two.touch()
    first, second = FileWake(one), FileWake(two)
    loop = asyncio.get_running_loop()
    assert len([i for i in _wake._INSTANCES if i is loop]) == 1
    first.close()
    assert loop in _wake._INSTANCES
    second.close()
    assert loop not in _wake._INSTANCES


async def test_without_inotify_the_wait_is_a_sleep(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_wake, "libc_with", lambda symbol: None)
    path = tmp_path / "stdout"
    path.touch()
    wake = FileWake(path)
    assert not wake.active
    path.write_text("x")
    started = time.monotonic()
    await wake.wait(0.05)
    assert time.monotonic() - started >= 0.04
    wake.close()
