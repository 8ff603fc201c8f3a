"""Gemini CLI's own chat file (``$HOME/.gemini/tmp/<dir>/chats/session-<ts>-<id8>.jsonl``)
read back as canonical events after ``chorus talk``. Sans-I/O: lines in, events out.

The file holds one record per line: a header (``sessionId``, ``projectHash``),
``$set`` updates (skipped), and messages: ``type: "user"`` with ``content`` parts
(``text`` the person typed, as ``Notice(kind="talk")``; ``functionResponse`` as
:class:`ToolResult`) and ``type: "gemini"`` with ``content`` text and
``toolCalls``. A message is written again as it grows (same ``id``): each text and
each call is taken once. The context block Gemini writes itself
(``<session_context>``) is skipped.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from chorus.bodies._tools import normalize_tool
from chorus.events import Event, Notice, Text, ToolCall, ToolResult

JsonDict = dict[str, Any]


def gemini_talk_events(lines: Iterable[str]) -> list[Event]:
    """The events of the chat file's ``lines`` (unknown lines skipped)."""
    seen: set[str] = set()
    events: list[Event] = []
    for line in lines:
        record = _record(line)
        if record is not None:
            events += [e for e in _events(record) if _first(e, record, seen)]
    return events


def _record(line: str) -> JsonDict | None:
    try:
        record = json.loads(line)
    except ValueError:
        return None
    if not isinstance(record, dict) or record.get("type") not in ("user", "gemini"):
        return None
    return record


def _first(event: Event, record: JsonDict, seen: set[str]) -> bool:
    """Whether ``event`` is new (a message rewritten as it grows repeats its parts)."""
    key = f"{record.get('id')}:{event.model_dump_json(exclude={'ts'})}"
    if key in seen:
        return False
    seen.add(key)
    return True


def _events(record: JsonDict) -> list[Event]:
    content = record.get("content")
    if record["type"] == "user":
        parts = content if isinstance(content, list) else []
        return [e for p in parts if isinstance(p, dict) for e in _user_part(p)]
    events: list[Event] = []
    if isinstance(content, str) and content:
        mid = record.get("id")
        events.append(Text(text=content, message_id=mid if isinstance(mid, str) else None))
    calls = record.get("toolCalls")
    for call in calls if isinstance(calls, list) else []:
        if isinstance(call, dict) and isinstance(call.get("name"), str) and call.get("id"):
            events.append(_tool_call(call))
    return events


def _user_part(part: JsonDict) -> list[Event]:
    text = part.get("text")
    if isinstance(text, str):
        typed = text.strip() and not text.lstrip().startswith("<session_context>")
        return [Notice(message=text, kind="talk")] if typed else []
    response = part.get("functionResponse")
    if isinstance(response, dict) and response.get("id"):
        return [_tool_result(response)]
    return []


def _tool_call(call: JsonDict) -> ToolCall:
    native = str(call["name"])
    args = call.get("args")
    tool_input = dict(args) if isinstance(args, dict) else {}
    title = tool_input.get("description")
    return ToolCall(
        call_id=str(call["id"]),
        tool=normalize_tool(native),
        native_tool=native,
        input=tool_input,
        title=title if isinstance(title, str) else None,
    )


def _tool_result(response: JsonDict) -> ToolResult:
    inner = response.get("response")
    output = inner.get("output", inner.get("error")) if isinstance(inner, dict) else inner
    return ToolResult(
        call_id=str(response["id"]),
        output=output if isinstance(output, str) else json.dumps(output),
        is_error=isinstance(inner, dict) and "error" in inner,
        untrusted=True,
    )
