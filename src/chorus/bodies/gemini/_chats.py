"""Keep a Gemini session's chat file safe from its own ``session/load``.

Gemini CLI 0.61 keeps a session in ``~/.gemini/tmp/<project>/chats/
session-<YYYY-MM-DDTHH-MM>-<id8>.jsonl``, named after the minute (UTC) it began.
``session/load`` starts the session's chat recording *before* it reads the stored
conversation, and the recording opens ``session-<now>-<id8>.jsonl``: in the minute
the session began that is the stored file itself, whose messages it resets to the
bare context block (``"$set": {"messages": [...]}``); the load then finds nothing to
resume ("No previous sessions found for this project.") and the conversation is
lost. A file of an earlier minute is left alone, found, and the recording goes on in
it. So before a load, :func:`spare_this_minute` moves the session's file of the
current minute to the previous minute's name: Gemini finds the same file, whole.

The recording the load started first is left behind as a file of the session holding
only the context block, and at every start Gemini's session cleanup deletes each file
with no conversation *and every other file of the same session* (it matches them by
the short id): the next Gemini to start in the folder would delete the session the
load just resumed. So after a load, :func:`drop_load_stubs` deletes the files of the
session that the load made and that hold no conversation (Gemini writes on in the
loaded file).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path

from chorus.bodies.gemini._transcript import gemini_talk_events

_MINUTE = "%Y-%m-%dT%H-%M"


def gemini_state(env: Mapping[str, str]) -> Path | None:
    """Gemini's ``.gemini`` folder for a body run with ``env``."""
    base = env.get("GEMINI_CLI_HOME") or env.get("HOME")
    return Path(base) / ".gemini" if base else None


def spare_this_minute(state: Path, session_id: str, now: datetime | None = None) -> list[Path]:
    """Rename each chat file of ``session_id`` named after the current minute (under
    ``state``, Gemini's ``.gemini`` folder) to the previous minute's name; the files
    renamed. A link, a project folder that is a link, or a name already taken is
    left as it is."""
    now = now or datetime.now(UTC)
    this, before = (_name(t, session_id) for t in (now, now - timedelta(minutes=1)))
    moved = []
    for chats in _chat_folders(state):
        source, target = chats / this, chats / before
        if _plain(source) and not os.path.lexists(target):
            os.rename(source, target)
            moved.append(target)
    return moved


def _name(minute: datetime, session_id: str) -> str:
    return f"session-{minute.strftime(_MINUTE)}-{session_id[:8]}.jsonl"


def _plain(path: Path) -> bool:
    return path.is_file() and not path.is_symlink()


def _chat_folders(state: Path) -> list[Path]:
    """``state/tmp/<project>/chats`` folders that are real folders (no links)."""
    tmp = state / "tmp"
    if not tmp.is_dir() or tmp.is_symlink():
        return []
    projects = [p / "chats" for p in tmp.iterdir() if p.is_dir() and not p.is_symlink()]
    return [c for c in projects if c.is_dir() and not c.is_symlink()]


def chat_files(state: Path, session_id: str) -> set[Path]:
    """The session's chat files (plain files, in real chat folders)."""
    pattern = f"session-*-{session_id[:8]}.jsonl"
    return {f for chats in _chat_folders(state) for f in chats.glob(pattern) if _plain(f)}


def drop_load_stubs(state: Path, session_id: str, before: set[Path]) -> list[Path]:
    """Delete the session's chat files that were not there ``before`` the load and
    hold no conversation; the files deleted."""
    stubs = [f for f in chat_files(state, session_id) - before if _empty(f)]
    for stub in stubs:
        stub.unlink(missing_ok=True)
    return stubs


#: A stub is a header and the context block: a file larger than this is kept unread.
_STUB_MAX = 64 << 10


def _empty(path: Path) -> bool:
    """Whether the chat file holds no conversation (only the context block)."""
    try:
        if path.stat().st_size > _STUB_MAX:
            return False
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return False
    return not gemini_talk_events(lines)
