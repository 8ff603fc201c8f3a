"""Claude Code's own session file, read back after a talk: a real file the CLI
wrote (a print turn with a Bash call, then a prompt typed in ``claude --resume``)."""

from __future__ import annotations

import json
from pathlib import Path

from chorus.bodies.claude._transcript import claude_talk_events
from chorus.events import Notice, Text, Thinking, ToolCall, ToolResult

SAMPLE = Path(__file__).resolve().parents[2] / "transcripts" / "claude" / "talk_session_file.jsonl"


def _lines() -> list[str]:
    return SAMPLE.read_text().splitlines()


def test_the_real_session_file_gives_the_turns_in_order() -> None:
    events = claude_talk_events(_lines())
    kinds = [type(e).__name__ for e in events]
    assert kinds == ["Notice", "ToolCall", "ToolResult", "Text", "Notice", "Text"]
    typed = [e.message for e in events if isinstance(e, Notice)]
    assert typed == ["make made.txt", "ping please"]
    assert all(e.kind == "talk" for e in events if isinstance(e, Notice))
    call = next(e for e in events if isinstance(e, ToolCall))
    result = next(e for e in events if isinstance(e, ToolResult))
    assert (call.tool, call.native_tool, call.input["command"]) == (
        "shell",
        "Bash",
        "echo hi > made.txt",
    )
    assert result.call_id == call.call_id
    assert [e.text for e in events if isinstance(e, Text)] == ["made it", "second answer PONG"]


def test_only_the_lines_after_a_mark_give_only_the_talk() -> None:
    lines = _lines()
    start = next(i for i, line in enumerate(lines) if "ping please" in line)
    events = claude_talk_events(lines[start:])
    assert [type(e) for e in events] == [Notice, Text]


def test_sidechains_meta_reminders_and_junk_are_skipped() -> None:
    base = {"type": "user", "message": {"role": "user", "content": "x"}}
    lines = [
        json.dumps({**base, "isSidechain": True}),
        json.dumps({**base, "isMeta": True}),
        json.dumps({**base, "message": {"content": "<system-reminder>hi</system-reminder>"}}),
        json.dumps({**base, "message": "not an object"}),
        json.dumps({"type": "assistant", "message": {"content": [{"type": "tool_use"}]}}),
        "[1, 2]",
        "{",
        json.dumps(
            {"type": "assistant", "message": {"content": [{"type": "thinking", "thinking": "t"}]}}
        ),
    ]
    events = claude_talk_events(lines)
    assert [type(e) for e in events] == [Thinking]
