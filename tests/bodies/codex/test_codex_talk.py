"""Codex's rollout read back after a talk: a real rollout the CLI wrote."""

from __future__ import annotations

import json
from pathlib import Path

from chorus.bodies.codex._talk import codex_talk_events
from chorus.events import Notice, Text, ToolCall, ToolResult

SAMPLE = Path(__file__).resolve().parents[2] / "transcripts" / "codex" / "talk_rollout.jsonl"


def test_the_real_rollout_gives_the_turn() -> None:
    events = codex_talk_events(SAMPLE.read_text().splitlines())
    assert [type(e) for e in events] == [Notice, ToolCall, ToolResult, Text]
    notice, call, result, text = events
    assert isinstance(notice, Notice)
    assert notice.message == "make made.txt"  # not Codex's own <environment_context>
    assert isinstance(call, ToolCall)
    assert (call.native_tool, call.input["cmd"]) == ("exec_command", "echo hi > made.txt")
    assert isinstance(result, ToolResult)
    assert result.call_id == call.call_id
    assert isinstance(text, Text)
    assert text.text == "made it"


def test_junk_and_odd_shapes_are_skipped() -> None:
    item = {"type": "response_item", "payload": {"type": "function_call", "name": "x"}}
    lines = ["{", "[]", json.dumps(item), json.dumps({"type": "response_item", "payload": 3})]
    bad_args = {**item["payload"], "call_id": "c", "arguments": "{not json"}
    lines.append(json.dumps({"type": "response_item", "payload": bad_args}))
    events = codex_talk_events(lines)
    assert len(events) == 1
    assert isinstance(events[0], ToolCall)
    assert events[0].input == {"arguments": "{not json"}
