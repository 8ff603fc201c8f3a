"""What a job changed, as a unified diff, for a job that ran in its own folder
(a worktree job's diff comes from git, through :mod:`chorus.worktrees`).

The diff is made from the job's own events: each ``write`` (the whole new
content), ``edit`` (old and new strings, one or several) and each body's
``file_change`` (its own diff), skipping calls that failed or were denied.
Nothing is read from disk: a path in an event is a name to show, never a file
to open (an event may name ``../../etc/shadow``). Sans-I/O.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any

from chorus.events import Event, FileChange, ToolCall, ToolResult

#: Tool calls that write a file, and where their path is.
_PATH_KEYS = ("file_path", "path", "filename")


def _path(data: dict[str, Any]) -> str | None:
    for key in _PATH_KEYS:
        value = data.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def _shown(path: str, cwd: str | None) -> str:
    """``path`` relative to the job's folder when it is inside it."""
    if cwd and path.startswith(cwd.rstrip("/") + "/"):
        return path[len(cwd.rstrip("/")) + 1 :]
    return path


def _unified(path: str, old: str, new: str, *, created: bool = False) -> str:
    before = "/dev/null" if created else f"a/{path}"
    lines = difflib.unified_diff(
        old.splitlines(keepends=True), new.splitlines(keepends=True), before, f"b/{path}"
    )
    body = "".join(line if line.endswith("\n") else line + "\n" for line in lines)
    return f"diff --git a/{path} b/{path}\n{body}" if body else ""


def _edits(data: dict[str, Any]) -> list[tuple[str, str]]:
    """The (old, new) pairs of an edit call (Claude's Edit and MultiEdit)."""
    pairs = data.get("edits") if isinstance(data.get("edits"), list) else [data]
    out = []
    for pair in pairs or []:
        if not isinstance(pair, dict):
            continue
        old, new = pair.get("old_string"), pair.get("new_string")
        if isinstance(old, str) and isinstance(new, str):
            out.append((old, new))
    return out


def _call_diff(call: ToolCall, cwd: str | None) -> str:
    path = _path(call.input)
    if path is None:
        return ""
    shown = _shown(path, cwd)
    if call.tool == "write" and isinstance(call.input.get("content"), str):
        return _unified(shown, "", call.input["content"], created=True)
    if call.tool == "edit":
        return "".join(_unified(shown, old, new) for old, new in _edits(call.input))
    return ""


def _failed(results: dict[str, ToolResult], call_id: str) -> bool:
    result = results.get(call_id)
    return result is not None and (result.is_error or result.status in ("denied", "failed"))


def diff_from_events(events: Iterable[Event], cwd: str | None) -> str:
    """The job's file writes and edits, in order, as one unified diff."""
    events = list(events)
    results = {e.call_id: e for e in events if isinstance(e, ToolResult)}
    parts: list[str] = []
    for event in events:
        if isinstance(event, ToolCall) and not _failed(results, event.call_id):
            parts.append(_call_diff(event, cwd))
        elif isinstance(event, FileChange) and event.diff:
            path = _shown(event.path, cwd)
            parts.append(f"diff --git a/{path} b/{path}\n{event.diff.rstrip()}\n")
    return "".join(parts)
