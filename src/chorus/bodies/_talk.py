"""What a person typed in a CLI's own interactive UI (``chorus talk``), read back
from the CLI's own transcript file so that it enters Chorus's log.

Each CLI appends its session to one JSONL file in its state folder (Claude
``<config>/projects/<slug>/<id>.jsonl``, Codex
``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<ts>-<id>.jsonl``, Gemini
``$HOME/.gemini/tmp/<dir>/chats/session-<ts>-<id8>.jsonl``). Before the hand-over
:func:`mark` remembers the file and its size; afterwards :func:`read_since` returns
the lines added meanwhile and a per-CLI parser (sans-I/O, lines in, events out:
:func:`talk_events`) turns them into canonical events.

The file was written by a process the model drove: it is found by a fixed pattern
under the CLI's state folder, opened one folder at a time without following links
(a link anywhere reads as nothing), must be a plain file with one link, is read
from the mark at most :data:`READ_CAP` bytes, and a line longer than
:data:`LINE_CAP` or not JSON is skipped.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from chorus.bodies.claude._transcript import claude_talk_events
from chorus.bodies.codex._rollout import _open_beneath, codex_home
from chorus.bodies.codex._talk import codex_talk_events
from chorus.bodies.gemini._chats import gemini_state
from chorus.bodies.gemini._transcript import gemini_talk_events
from chorus.events import Event, Notice, ToolCall

#: Bytes read after the mark at most, and the longest line kept.
READ_CAP = 16 << 20
LINE_CAP = 1 << 20
#: Events one talk brings in at most, and the longest text of one (a log event
#: stays under ``chorus.events.MAX_EVENT_BYTES``).
MAX_EVENTS = 2000
TEXT_CAP = 128 << 10
_CUT = "\n[... cut by Chorus: longer than the log keeps]"
#: A native session id as the CLIs make them (UUIDs); anything else names no file.
_NATIVE_ID = re.compile(r"[0-9A-Za-z-]{8,64}")

Parser = Callable[[Iterable[str]], list[Event]]
_PARSERS: dict[str, Parser] = {
    "claude": claude_talk_events,
    "codex": codex_talk_events,
    "gemini": gemini_talk_events,
}


@dataclass(frozen=True, slots=True)
class TranscriptMark:
    """Where the talk started: the file (relative to the state folder) and its size."""

    cli: str
    home: Path
    relative: Path | None
    offset: int

    def as_dict(self) -> dict[str, object]:
        rel = str(self.relative) if self.relative is not None else None
        return {"cli": self.cli, "relative": rel, "offset": self.offset}


def state_home(cli: str, env: Mapping[str, str]) -> Path | None:
    """The folder the CLI keeps its sessions in, for the environment it runs with."""
    home = env.get("HOME")
    if cli == "claude":
        if env.get("CLAUDE_CONFIG_DIR"):
            return Path(env["CLAUDE_CONFIG_DIR"])
        return Path(home) / ".claude" if home else None
    if cli == "codex":
        return codex_home(env)
    if cli == "gemini":
        return gemini_state(env)
    return None


def find_transcript(cli: str, home: Path, native_id: str) -> Path | None:
    """The session's file relative to ``home`` (the newest match), or None."""
    if not _NATIVE_ID.fullmatch(native_id) or not home.is_dir():
        return None
    patterns = {
        "claude": f"projects/*/{native_id}.jsonl",
        "codex": f"sessions/*/*/*/rollout-*-{native_id}.jsonl",
        "gemini": f"tmp/*/chats/session-*-{native_id[:8]}*.jsonl",
    }
    pattern = patterns.get(cli)
    found = sorted(home.glob(pattern), key=_mtime) if pattern else []
    return found[-1].relative_to(home) if found else None


def _mtime(path: Path) -> float:
    try:
        return path.lstat().st_mtime
    except OSError:
        return 0.0


def mark(cli: str, env: Mapping[str, str], native_id: str) -> TranscriptMark | None:
    """Before the hand-over: the session's file and its size now (None: a CLI with
    no known state folder)."""
    home = state_home(cli, env)
    if home is None or cli not in _PARSERS:
        return None
    relative = find_transcript(cli, home, native_id)
    return TranscriptMark(cli, home, relative, _size(home, relative))


def _size(home: Path, relative: Path | None) -> int:
    fd = _open_beneath(home, relative) if relative is not None else None
    if fd is None:
        return 0
    try:
        return os.fstat(fd).st_size
    finally:
        os.close(fd)


def read_since(start: TranscriptMark, native_id: str) -> list[str]:
    """The complete lines added to the session's file since ``start`` (a file that
    appeared meanwhile, e.g. a CLI that writes a new one on resume, is read whole)."""
    relative = start.relative or find_transcript(start.cli, start.home, native_id)
    offset = start.offset if start.relative is not None else 0
    if relative is None:
        return []
    fd = _open_beneath(start.home, relative)
    if fd is None:
        return []
    try:
        os.lseek(fd, offset, os.SEEK_SET)
        data = _read_bounded(fd, READ_CAP)
    finally:
        os.close(fd)
    return split_lines(data)


def _read_bounded(fd: int, cap: int) -> bytes:
    chunks: list[bytes] = []
    left = cap
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def split_lines(data: bytes) -> list[str]:
    """Complete lines (the unfinished last one dropped), each at most :data:`LINE_CAP`."""
    *complete, _partial = data.split(b"\n")
    return [r.decode("utf-8", errors="replace") for r in complete if r and len(r) <= LINE_CAP]


def talk_events(cli: str, lines: Iterable[str]) -> list[Event]:
    """The canonical events of the lines a talk added (sans-I/O), bounded: at most
    :data:`MAX_EVENTS` (then a notice says how many were left out), texts cut at
    :data:`TEXT_CAP`."""
    parser = _PARSERS.get(cli)
    events = [_bounded(e) for e in parser(lines)] if parser is not None else []
    if len(events) <= MAX_EVENTS:
        return events
    left = len(events) - MAX_EVENTS
    note = Notice(message=f"{left} more event(s) of the talk were left out", kind="policy")
    return [*events[:MAX_EVENTS], note]


def _bounded(event: Event) -> Event:
    """``event`` with its long text cut (a tool call's long input replaced)."""
    update: dict[str, object] = {}
    for name in ("text", "message", "output"):
        value = getattr(event, name, None)
        if isinstance(value, str) and len(value) > TEXT_CAP:
            update[name] = value[:TEXT_CAP] + _CUT
    if isinstance(event, ToolCall) and len(json.dumps(event.input)) > TEXT_CAP:
        update["input"] = {"cut": "the input was longer than the log keeps"}
    return event.model_copy(update=update) if update else event
