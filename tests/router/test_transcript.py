"""The transcript bundle: a session's log as text a fresh body reads first."""

from __future__ import annotations

from chorus.events import Event, Steer, Text, TextDelta, ToolCall, ToolResult, TurnCompleted
from chorus.router import transcript_bundle


def _session() -> list[Event]:
    return [
        TextDelta(text="Look", job_id="j1"),
        Text(text="Looking at the file.", job_id="j1"),
        ToolCall(
            call_id="c1",
            tool="shell",
            native_tool="Bash",
            input={"command": "cat a.txt"},
            job_id="j1",
        ),
        ToolResult(call_id="c1", output="alpha", job_id="j1"),
        TurnCompleted(result="It says alpha.", job_id="j1"),
        Steer(text="also count words", job_id="j2"),
        TurnCompleted(result="One word: pineapple.", job_id="j2"),
    ]


def test_prompts_answers_and_tools_in_order() -> None:
    text = transcript_bundle(_session(), 10_000, prompts={"j1": "read a.txt", "j2": "and?"})
    assert text is not None
    body = text.split("\n\n")[1].splitlines()
    assert body == [
        "user: read a.txt",
        "assistant: Looking at the file.",
        "tool shell: {'command': 'cat a.txt'}",
        "result: alpha",
        "user: and?",
        "user: also count words",
        "assistant: One word: pineapple.",
    ]
    assert text.startswith("[Chorus] This conversation continues")


def test_the_newest_turns_are_kept_within_the_budget() -> None:
    events: list[Event] = []
    for n in range(50):
        events.append(TurnCompleted(result=f"answer number {n} " + "x" * 80, job_id=f"j{n}"))
    text = transcript_bundle(events, 1200)
    assert text is not None
    assert len(text) <= 1200
    assert "answer number 49" in text
    assert "answer number 0 " not in text
    assert "(earlier turns trimmed)" in text


def test_an_empty_log_gives_nothing() -> None:
    assert transcript_bundle([], 1000) is None
    assert transcript_bundle([TextDelta(text="partial")], 1000) is None
