"""The drop folders: a real inotify watcher picks files up, posts them, deletes them;
a malformed one goes to rejected/ with its reason; files there before the watcher
started are picked up first."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from pathlib import Path

from chorus.teams import Dropped, Member, TeamConfig, inbox_dir, watch_drops
from chorus.teams._config import save_team

TEAM = TeamConfig(name="t", members={"perf": Member(body="codex")})


async def _until(check: Callable[[], bool]) -> None:
    async with asyncio.timeout(10):
        while not check():  # noqa: ASYNC110 (the watcher gives no event to wait on)
            await asyncio.sleep(0.05)


def _atomic(folder: Path, name: str, data: str, tmp: Path) -> Path:
    source = tmp / name
    source.write_text(data)
    os.replace(source, folder / name)
    return folder / name


async def test_dropped_files_are_posted_once_and_bad_ones_rejected(tmp_path: Path) -> None:
    save_team(TEAM)
    inbox = inbox_dir("t", "perf")
    early = _atomic(inbox, "early.txt", "there before", tmp_path)
    got: list[tuple[str, str, Dropped]] = []

    async def post(team: str, member: str, message: Dropped) -> None:
        got.append((team, member, message))

    stop = asyncio.Event()
    watcher = asyncio.create_task(watch_drops(post, stop))
    await _until(lambda: len(got) == 1)
    assert not early.exists()
    _atomic(inbox, "m.json", '{"text": "from mv", "kind": "steer"}', tmp_path)
    _atomic(inbox, "bad.json", "{", tmp_path)
    (inbox / "half.tmp").write_text("being written")
    await _until(lambda: len(got) == 2 and (inbox / "rejected" / "bad.json.reason").exists())
    stray = inbox.parent / "ghost"
    stray.mkdir()
    _atomic(stray, "x.txt", "to nobody", tmp_path)
    await _until(lambda: (stray / "rejected" / "x.txt.reason").exists())
    stop.set()
    await asyncio.wait_for(watcher, 10)
    assert [(t, m, d.kind, d.text) for t, m, d in got] == [
        ("t", "perf", "status", "there before"),
        ("t", "perf", "steer", "from mv"),
    ]
    assert (inbox / "half.tmp").exists()  # a file still being written is left alone
    assert "not valid JSON" in (inbox / "rejected" / "bad.json.reason").read_text()
    assert "no member 'ghost'" in (stray / "rejected" / "x.txt.reason").read_text()


async def test_a_failed_post_leaves_the_file_for_the_next_try(tmp_path: Path) -> None:
    save_team(TEAM)
    inbox = inbox_dir("t", "perf")
    kept = _atomic(inbox, "m.txt", "keep me", tmp_path)

    async def post(team: str, member: str, message: Dropped) -> None:
        raise OSError("the store is down")

    stop = asyncio.Event()
    watcher = asyncio.create_task(watch_drops(post, stop))
    done, _ = await asyncio.wait({watcher}, timeout=10)
    assert done  # the watcher stops with the error (the daemon restarts it)
    assert isinstance(watcher.exception(), OSError)
    assert kept.exists()
