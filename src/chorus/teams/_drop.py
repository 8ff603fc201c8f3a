"""The inbox drop folders: any process may write a message file into
``teams/NAME/inboxes/MEMBER/`` (write elsewhere, then rename into it: one file per
message). A watcher (inotify through ``watchfiles``, not a poll loop) picks each
up, posts it, logs it and deletes it; a malformed file goes to ``rejected/`` with
a ``.reason`` file beside it. Files already there when the daemon starts are
picked up first. A file is posted before it is deleted, with an id derived from
its name and content, so a crash in between cannot post it twice.

Only regular files are messages. A symbolic link, a named pipe, a folder, a socket
or a device dropped there goes to ``rejected/`` unread, its ``.reason`` saying what
it was; a drop folder that is itself a link is left alone (logged). Every access
goes through :mod:`chorus.teams._nofollow`: no link is followed, no pipe is waited
on.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path

from watchfiles import Change, awatch

from chorus.store import UnknownMemberError
from chorus.teams._config import TeamError, load_team, teams_dir
from chorus.teams._nofollow import (
    NotRegularError,
    UnsafeFolderError,
    move_aside,
    open_folder,
    read_regular,
    remove,
)
from chorus.teams._protocol import MAX_DROP_BYTES, BadDropError, Dropped, read_drop

log = logging.getLogger("chorus.teams")
logging.getLogger("watchfiles").setLevel(logging.WARNING)  # it logs every change at INFO

#: Posts one dropped message: (team, member, message).
Post = Callable[[str, str, Dropped], Awaitable[None]]
#: Where refused entries go, in each drop folder.
REJECTED = "rejected"


def inbox_of(path: Path, root: Path) -> tuple[str, str] | None:
    """(team, member) when ``path`` is a message file in a drop folder."""
    try:
        parts = path.relative_to(root).parts
    except ValueError:
        return None
    if len(parts) != 4 or parts[1] != "inboxes":
        return None
    name = parts[3]
    if name == REJECTED or name.startswith(".") or name.endswith((".tmp", ".part", ".swp", "~")):
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
    if where is None:
        return "ignored"
    team_name, member = where
    try:
        return await _ingest(path, root, post, team_name, member)
    except UnsafeFolderError as exc:
        log.warning("team %s: drop folder of %s not read: %s", team_name, member, exc)
        return "ignored"


async def _ingest(path: Path, root: Path, post: Post, team_name: str, member: str) -> str:
    try:
        data = await asyncio.to_thread(_read, root, path)
    except FileNotFoundError:
        return "ignored"  # gone already (posted by an earlier event, or moved away)
    except NotRegularError as exc:
        return await _reject(team_name, path, root, f"not a regular file: {exc}")
    try:
        team = load_team(team_name)
        team.check_member(member)
        message = read_drop(path.name, data, team.mailbox_names)
        await post(team_name, member, message)
    except (BadDropError, TeamError, UnknownMemberError) as exc:
        return await _reject(team_name, path, root, str(exc))
    await asyncio.to_thread(_remove, root, path)
    log.info("team %s: dropped message %s for %s posted", team_name, path.name, member)
    return "posted"


def _folder_parts(path: Path, root: Path) -> tuple[str, ...]:
    return path.parent.relative_to(root).parts


def _read(root: Path, path: Path) -> bytes:
    with open_folder(root, _folder_parts(path, root)) as folder:
        return read_regular(folder, path.name, MAX_DROP_BYTES)


def _remove(root: Path, path: Path) -> None:
    with open_folder(root, _folder_parts(path, root)) as folder:
        remove(folder, path.name)


async def _reject(team_name: str, path: Path, root: Path, reason: str) -> str:
    await asyncio.to_thread(reject, path, reason, root)
    log.warning("team %s: dropped file %s rejected: %s", team_name, path.name, reason)
    return "rejected"


def reject(path: Path, reason: str, root: Path | None = None) -> None:
    """Move the entry at ``path`` (a link moves as a link) into ``rejected/`` with a
    ``.reason`` file beside it; no link on the way is followed."""
    base = root or teams_dir()
    with open_folder(base, _folder_parts(path, base)) as folder:
        move_aside(folder, path.name, REJECTED, reason)


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
            for path in _dropped_at(Path(raw), root):
                await ingest(path, root, post)


def _dropped_at(path: Path, root: Path) -> list[Path]:
    """The entries a change stands for: a new inbox folder's contents (a file moved in
    before inotify watched the folder has no event of its own), else the entry."""
    if _is_inbox(path, root) and path.is_dir() and not path.is_symlink():
        return sorted(path.iterdir())
    return [path]
