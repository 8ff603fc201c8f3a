"""The drop folders: a real inotify watcher picks files up, posts them, deletes them;
a malformed one goes to rejected/ with its reason; files there before the watcher
started are picked up first. Links, pipes and folders are refused unread, and no
link (a dropped one, a planted ``rejected`` or ``.reason``, a linked inbox) is
followed."""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path

from chorus.teams import Dropped, Member, TeamConfig, inbox_dir, ingest, watch_drops
from chorus.teams._config import save_team
from tests._wait import until_async

TEAM = TeamConfig(name="t", members={"perf": Member(body="codex")})


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
    await until_async(lambda: len(got) == 1)
    assert not early.exists()
    _atomic(inbox, "m.json", '{"text": "from mv", "kind": "steer"}', tmp_path)
    _atomic(inbox, "bad.json", "{", tmp_path)
    (inbox / "half.tmp").write_text("being written")
    await until_async(lambda: len(got) == 2 and (inbox / "rejected" / "bad.json.reason").exists())
    stray = inbox.parent / "ghost"
    stray.mkdir()
    _atomic(stray, "x.txt", "to nobody", tmp_path)
    await until_async(lambda: (stray / "rejected" / "x.txt.reason").exists())
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


async def _ingest_all(tmp_path: Path) -> list[Dropped]:
    """Run the watcher over what is in the drop folders now; what it posted."""
    got: list[Dropped] = []

    async def post(team: str, member: str, message: Dropped) -> None:
        got.append(message)

    stop = asyncio.Event()
    watcher = asyncio.create_task(watch_drops(post, stop))
    await until_async(lambda: not (inbox_dir("t", "perf") / "last.txt").exists())
    stop.set()
    await asyncio.wait_for(watcher, 10)
    return got


async def test_links_pipes_and_folders_go_to_rejected_unread(tmp_path: Path) -> None:
    save_team(TEAM)
    inbox = inbox_dir("t", "perf")
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET")
    (inbox / "link.txt").symlink_to(secret)
    (inbox / "dangling.json").symlink_to(tmp_path / "nowhere")
    os.mkfifo(inbox / "pipe.txt")  # opened for reading, a blocking reader would hang
    (inbox / "folder").mkdir()
    (inbox / "folder" / "x.txt").write_text("inside")
    _atomic(inbox, "last.txt", "the real one", tmp_path)
    got = await asyncio.wait_for(_ingest_all(tmp_path), 20)
    assert [d.text for d in got] == ["the real one"]
    rejected = inbox / "rejected"
    why = {p.name: p.read_text() for p in rejected.glob("*.reason")}
    assert "a symbolic link" in why["link.txt.reason"]
    assert "a symbolic link" in why["dangling.json.reason"]
    assert "a named pipe" in why["pipe.txt.reason"]
    assert "a folder" in why["folder.reason"]
    assert (rejected / "link.txt").is_symlink()
    assert (rejected / "folder" / "x.txt").read_text() == "inside"
    assert secret.read_text() == "TOP-SECRET"


async def test_planted_links_in_rejected_are_not_written_through(tmp_path: Path) -> None:
    save_team(TEAM)
    inbox = inbox_dir("t", "perf")
    target = tmp_path / "victim.txt"
    target.write_text("untouched")
    (inbox / "rejected").mkdir(exist_ok=True)
    (inbox / "rejected" / "bad.json.reason").symlink_to(target)  # waits for a reason
    _atomic(inbox, "bad.json", "{", tmp_path)
    _atomic(inbox, "last.txt", "the real one", tmp_path)
    await asyncio.wait_for(_ingest_all(tmp_path), 20)
    assert target.read_text() == "untouched"
    # The name was taken (by the link): the file and its reason get the next free one.
    assert (inbox / "rejected" / "bad.json.1").read_text() == "{"
    assert "not valid JSON" in (inbox / "rejected" / "bad.json.1.reason").read_text()


async def test_a_linked_rejected_folder_or_inbox_is_not_followed(tmp_path: Path) -> None:
    save_team(TEAM)
    inbox = inbox_dir("t", "perf")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.rmtree(inbox / "rejected", ignore_errors=True)
    (inbox / "rejected").symlink_to(elsewhere)
    (inbox / "pipe.txt").symlink_to(tmp_path / "x")
    _atomic(inbox, "last.txt", "the real one", tmp_path)
    got = await asyncio.wait_for(_ingest_all(tmp_path), 20)
    assert [d.text for d in got] == ["the real one"]
    assert list(elsewhere.iterdir()) == []  # nothing moved into the link's target
    assert (inbox / "pipe.txt").is_symlink()  # left where it was, unread (logged)
    # A member's drop folder that is itself a link: nothing in it is read.
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "m.txt").write_text("OUTSIDE-FILE")
    linked = TeamConfig(name="u", members={"perf": Member(body="codex")})
    save_team(linked)
    shutil.rmtree(inbox_dir("u", "perf"))
    inbox_dir("u", "perf").symlink_to(outside)
    posted: list[Dropped] = []

    async def post(team: str, member: str, message: Dropped) -> None:
        posted.append(message)

    root = inbox.parents[2]
    assert await ingest(inbox_dir("u", "perf") / "m.txt", root, post) == "ignored"
    assert posted == []
    assert (outside / "m.txt").read_text() == "OUTSIDE-FILE"
