"""Codex's rollout read back as canonical events after ``chorus talk``: what the
person typed in ``codex resume`` and the assistant's answers. Sans-I/O: lines in,
events out. Of the ``response_item`` lines: user and assistant messages,
``function_call`` (a :class:`ToolCall`) and ``function_call_output`` (a
:class:`ToolResult`); the file itself is opened as :mod:`._rollout` does. Context Codex adds
itself (``<environment_context>``, ``<user_instructions>`` ...) is skipped."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from chorus.bodies._tools import normalize_tool
from chorus.events import Event, Notice, Text, ToolCall, ToolResult


def codex_talk_events(lines: Iterable[str]) -> list[Event]:
    """The events of the rollout's ``lines`` (unknown lines skipped)."""
    return [event for line in lines for event in _item(line)]


def _item(line: str) -> list[Event]:
    try:
        entry = json.loads(line)
        payload = entry["payload"]
        kind = payload["type"] if entry["type"] == "response_item" else None
    except (ValueError, KeyError, TypeError):
        return []
    if kind == "function_call" and isinstance(payload.get("name"), str):
        return [_call(payload)] if payload.get("call_id") else []
    if kind == "function_call_output" and payload.get("call_id"):
        return [ToolResult(call_id=str(payload["call_id"]), output=_text(payload.get("output")))]
    if kind != "message" or not isinstance(payload.get("content"), list):
        return []
    text = "".join(_texts(payload["content"]))
    if payload.get("role") == "user" and text.strip() and not text.lstrip().startswith("<"):
        return [Notice(message=text, kind="talk")]
    if payload.get("role") == "assistant" and text:
        return [Text(text=text, message_id=_id(payload))]
    return []


def _texts(content: list[Any]) -> list[str]:
    kinds = ("input_text", "output_text")
    return [
        str(b["text"])
        for b in content
        if isinstance(b, dict) and b.get("type") in kinds and isinstance(b.get("text"), str)
    ]


def _id(payload: dict[str, Any]) -> str | None:
    value = payload.get("id")
    return value if isinstance(value, str) else None


def _call(payload: dict[str, Any]) -> ToolCall:
    name = str(payload["name"])
    try:
        args = json.loads(str(payload.get("arguments") or "{}"))
    except ValueError:
        args = {"arguments": payload.get("arguments")}
    tool_input = args if isinstance(args, dict) else {"arguments": args}
    return ToolCall(
        call_id=str(payload["call_id"]),
        tool=normalize_tool(name),
        native_tool=name,
        input=tool_input,
    )


def _text(output: Any) -> str:
    return output if isinstance(output, str) else json.dumps(output)
