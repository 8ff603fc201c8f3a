"""Gemini CLI's chat file read back after a talk: a real file the CLI wrote."""

from __future__ import annotations

import json
from pathlib import Path

from chorus.bodies.gemini._transcript import gemini_talk_events
from chorus.events import Notice, Text, ToolCall, ToolResult

SAMPLE = Path(__file__).resolve().parents[2] / "transcripts" / "gemini" / "talk_chat_file.jsonl"


def test_the_real_chat_file_gives_the_turn_once() -> None:
    events = gemini_talk_events(SAMPLE.read_text().splitlines())
    # the model message is written twice as it grows: its call is taken once
    assert [type(e) for e in events] == [Notice, ToolCall, ToolResult, Text]
    notice, call, result, text = events
    assert isinstance(notice, Notice)
    assert notice.message == "make made.txt"  # not the <session_context> block
    assert isinstance(call, ToolCall)
    assert (call.tool, call.input["command"]) == ("shell", "echo hi > made.txt")
    assert isinstance(result, ToolResult)
    assert result.call_id == call.call_id
    assert result.untrusted
    assert isinstance(text, Text)
    assert text.text == "made it"


def test_junk_and_odd_shapes_are_skipped() -> None:
    lines = [
        "{",
        json.dumps({"$set": {"messages": [{"type": "user", "content": [{"text": "old"}]}]}}),
        json.dumps({"type": "user", "content": "not a list"}),
        json.dumps({"type": "gemini", "content": 5, "toolCalls": [{"name": "x"}, 3]}),
        json.dumps(
            {
                "type": "user",
                "content": [{"functionResponse": {"id": "c", "response": {"error": "no"}}}],
            }
        ),
    ]
    events = gemini_talk_events(lines)
    assert len(events) == 1
    assert isinstance(events[0], ToolResult)
    assert (events[0].is_error, events[0].output) == (True, "no")
