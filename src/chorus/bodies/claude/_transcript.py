"""Claude Code's own session file (``<config>/projects/<slug>/<id>.jsonl``) read
back as canonical events: what a person typed in ``claude --resume`` and what the
assistant answered (``chorus talk``). Sans-I/O: lines in, events out.

Kept: ``user`` lines the person typed (a string, or text blocks) as
``Notice(kind="talk")``, their ``tool_result`` blocks as :class:`ToolResult`;
``assistant`` lines' ``text``, ``thinking`` and ``tool_use`` blocks. Skipped:
sub-agent lines (``isSidechain``), lines the CLI wrote itself (``isMeta``,
system reminders), bookkeeping (``attachment``, ``api-request``, ``cost-state``
...), and any line that is not a JSON object of that shape.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from chorus.bodies.claude._codec import _tool_call  # one reading of a tool_use block
from chorus.events import Event, Notice, Text, Thinking, ToolResult

JsonDict = dict[str, Any]
#: Text the CLI puts in a user message itself, never typed by the person.
_CLI_MADE = ("<system-reminder>", "<local-command", "<command-", "[Request interrupted")


def claude_talk_events(lines: Iterable[str]) -> list[Event]:
    """The events of the session file's ``lines`` (unknown lines skipped)."""
    events: list[Event] = []
    for line in lines:
        entry = _entry(line)
        if entry is not None:
            events += _events(entry)
    return events


def _entry(line: str) -> JsonDict | None:
    try:
        entry = json.loads(line)
    except ValueError:
        return None
    if not isinstance(entry, dict) or entry.get("isSidechain") or entry.get("isMeta"):
        return None
    message = entry.get("message")
    return entry if isinstance(message, dict) else None


def _events(entry: JsonDict) -> list[Event]:
    content = entry["message"].get("content")
    if entry.get("type") == "user":
        return _user(content)
    if entry.get("type") == "assistant" and isinstance(content, list):
        message_id = entry["message"].get("id")
        mid = message_id if isinstance(message_id, str) else None
        return [e for b in content if isinstance(b, dict) for e in _assistant_block(b, mid)]
    return []


def _user(content: Any) -> list[Event]:
    if isinstance(content, str):
        return _typed(content)
    if not isinstance(content, list):
        return []
    events: list[Event] = []
    for block in content:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            events += _typed(block["text"])
        elif block.get("type") == "tool_result" and block.get("tool_use_id"):
            events.append(_tool_result(block))
    return events


def _typed(text: str) -> list[Event]:
    if not text.strip() or text.lstrip().startswith(_CLI_MADE):
        return []
    return [Notice(message=text, kind="talk")]


def _tool_result(block: JsonDict) -> ToolResult:
    return ToolResult(
        call_id=str(block["tool_use_id"]),
        output=_flatten(block.get("content")),
        is_error=bool(block.get("is_error")),
    )


def _assistant_block(block: JsonDict, message_id: str | None) -> list[Event]:
    kind = block.get("type")
    if kind == "text" and isinstance(block.get("text"), str) and block["text"]:
        return [Text(text=block["text"], message_id=message_id)]
    if kind == "thinking" and isinstance(block.get("thinking"), str) and block["thinking"]:
        return [Thinking(text=block["thinking"], message_id=message_id)]
    if kind == "tool_use" and isinstance(block.get("name"), str) and block.get("id"):
        return [_tool_call(block)]
    return []


def _flatten(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) if isinstance(p, dict) else str(p) for p in content)
    return json.dumps(content)
