"""The inbox drop folders: any process may write a message file into
``teams/NAME/inboxes/MEMBER/`` (write elsewhere, then rename into it: one file per
message). A watcher (inotify through ``watchfiles``, not a poll loop) picks each
up, posts it, logs it and deletes it; a malformed file goes to ``rejected/`` with
a ``.reason`` file beside it. Files already there when the daemon starts are
picked up first. A file is posted before it is deleted, with an id derived from
its name and content, so a crash in between cannot post it twice.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable
from pathlib import Path

from watchfiles import Change, awatch

from chorus.teams._config import TeamError, load_team, teams_dir
from chorus.teams._protocol import BadDropError, Dropped, read_drop

log = logging.getLogger("chorus.teams")
logging.getLogger("watchfiles").setLevel(logging.WARNING)  # it logs every change at INFO

#: Posts one dropped message: (team, member, message).
Post = Callable[[str, str, Dropped], Awaitable[None]]


def inbox_of(path: Path, root: Path) -> tuple[str, str] | None:
    """(team, member) when ``path`` is a message file in a drop folder."""
    try:
        parts = path.relative_to(root).parts
    except ValueError:
        return None
    if len(parts) != 4 or parts[1] != "inboxes":
        return None
    name = parts[3]
    if name.startswith(".") or name.endswith((".tmp", ".part", ".swp", "~")):
        return None
    return parts[0], parts[2]


def _is_inbox(path: Path, root: Path) -> bool:
    """``path`` is a member's drop folder (``NAME/inboxes/MEMBER``)."""
    try:
        parts = path.relative_to(root).parts
    except ValueError:
        return False
    return len(parts) == 3 and parts[1] == "inboxes"


async def ingest(path: Path, root: Path, post: Post) -> str:
    """Post one dropped file; returns ``posted``, ``rejected`` or ``ignored``."""
    where = inbox_of(path, root)
    if where is None or not await asyncio.to_thread(path.is_file):
        return "ignored"
    team_name, member = where
    try:
        team = load_team(team_name)
        team.check_member(member)
        data = await asyncio.to_thread(path.read_bytes)
        message = read_drop(path.name, data, team.mailbox_names)
        await post(team_name, member, message)
    except (BadDropError, TeamError) as exc:
        await asyncio.to_thread(reject, path, str(exc))
        log.warning("team %s: dropped file %s rejected: %s", team_name, path.name, exc)
        return "rejected"
    await asyncio.to_thread(path.unlink, missing_ok=True)
    log.info("team %s: dropped message %s for %s posted", team_name, path.name, member)
    return "posted"


def reject(path: Path, reason: str) -> None:
    folder = path.parent / "rejected"
    folder.mkdir(exist_ok=True)
    os.replace(path, folder / path.name)
    (folder / f"{path.name}.reason").write_text(reason + "\n")


def _wanted(root: Path) -> Callable[[Change, str], bool]:
    """Only new message files in drop folders (not the JSONL views, not rejected/)."""

    def wanted(change: Change, path: str) -> bool:
        if change == Change.deleted:
            return False
        return inbox_of(Path(path), root) is not None or _is_inbox(Path(path), root)

    return wanted


async def watch_drops(post: Post, stop: asyncio.Event | None = None) -> None:
    """Pick up what is already dropped, then every new file until ``stop``."""
    root = teams_dir()
    root.mkdir(parents=True, exist_ok=True)
    for path in sorted(root.glob("*/inboxes/*/*")):
        await ingest(path, root, post)
    watching = awatch(root, watch_filter=_wanted(root), stop_event=stop, debounce=50)
    async for changes in watching:
        for _, raw in sorted(changes, key=lambda c: c[1]):
            for path in _dropped_at(Path(raw)):
                await ingest(path, root, post)


def _dropped_at(path: Path) -> list[Path]:
    """The files a change stands for: a new inbox folder's contents (a file moved in
    before inotify watched the folder has no event of its own), else the file."""
    if path.is_dir():
        return sorted(p for p in path.iterdir() if p.is_file())
    return [path]
