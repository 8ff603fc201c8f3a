"""Scenario data: builders, JSON round trip, chunking."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from chorus.testing import (
    Failure,
    Reply,
    Scenario,
    Shell,
    Text,
    Thinking,
    ToolCall,
    WriteFile,
    error,
    shell,
    slow_text,
    text,
    thinking,
    tool_call,
    write_file,
)
from chorus.testing._scenario import as_scenario, split_chunks


def test_builders_make_the_expected_blocks() -> None:
    assert text("hi", chunks=2) == Reply(blocks=(Text(text="hi", chunks=2),))
    assert shell("ls", say="look") == Reply(blocks=(Text(text="look"), Shell(command="ls")))
    assert write_file("a.txt", "x").blocks == (WriteFile(path="a.txt", content="x"),)
    assert tool_call("Read", {"file_path": "/a"}).blocks == (
        ToolCall(name="Read", arguments={"file_path": "/a"}),
    )
    assert thinking("hmm", "ok").blocks == (Thinking(text="hmm"), Text(text="ok"))
    slow = slow_text("abcdef", chunks=3, delay=0.5)
    assert slow.delay == 0.5
    assert slow.blocks == (Text(text="abcdef", chunks=3),)
    assert error("quota", times=None) == Failure(error="quota", times=None)


def test_scenario_json_round_trip_keeps_every_turn_kind() -> None:
    scenario = Scenario.of(
        thinking("plan", "start"),
        shell("echo hi > out.txt", say="creating"),
        write_file("n.txt", "body\n"),
        tool_call("custom", {"k": [1, 2]}),
        slow_text("slow", chunks=4, delay=0.1),
        error("rate_limit", times=3),
        error("quota", times=None),
    )
    restored = Scenario.from_json(scenario.to_json())
    assert restored == scenario
    assert isinstance(restored.turns[5], Failure)
    assert restored.turns[5].times == 3


def test_as_scenario_accepts_plain_dicts_and_lists() -> None:
    scenario = as_scenario([{"kind": "failure", "error": "auth"}, text("x")])
    assert scenario.turns == (Failure(error="auth"), text("x"))


def test_turns_are_frozen_and_validated() -> None:
    turn = text("x")
    with pytest.raises(ValidationError):
        turn.delay = 3.0  # type: ignore[misc]
    with pytest.raises(ValidationError):
        Failure(error="teapot")  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        Text(text="x", chunks=0)


@given(st.text(max_size=200), st.integers(min_value=1, max_value=50))
def test_split_chunks_concatenates_back(content: str, chunks: int) -> None:
    pieces = split_chunks(content, chunks)
    assert "".join(pieces) == content
    assert 1 <= len(pieces) <= max(1, chunks)
    if content:
        assert all(pieces)
        assert len(pieces) == min(chunks, len(content))
