"""Anthropic Messages API rendering, side calls, errors and request reading."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from chorus.testing import (
    ModelServer,
    Scenario,
    error,
    parse_sse,
    shell,
    text,
    thinking,
    write_file,
)

MESSAGES = "/v1/messages?beta=true"


def claude_body(messages: list[dict[str, Any]], *, stream: bool = True) -> dict[str, Any]:
    """A trimmed Claude Code request body with the shapes that trap naive fakes."""
    return {
        "model": "claude-opus-5-5",
        "max_tokens": 128000,
        "stream": stream,
        "messages": messages,
    }


def first_turn(prompt: str) -> list[dict[str, Any]]:
    """Messages as Claude's first call sends them: reminder + prompt, then a system entry."""
    reminder = "<system-reminder>\nAttribution rules...\n</system-reminder>"
    return [
        {
            "role": "user",
            "content": [{"type": "text", "text": reminder}, {"type": "text", "text": prompt}],
        },
        {
            "role": "system",
            "content": "# Environment\n - Primary working directory: /work/demo/claude/r_wd\n",
        },
    ]


def post(server: ModelServer, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(server.url + MESSAGES, json=body, timeout=10)


def test_tool_use_stream_has_the_full_event_sequence(model_server: ModelServer) -> None:
    model_server.script(Scenario.of(shell("echo hello > out.txt", say="Creating.")))
    response = post(model_server, claude_body(first_turn("make out.txt")))

    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.headers["request-id"].startswith("req_")
    events = parse_sse(response.content)
    names = [e.event for e in events]
    assert names[:2] == ["message_start", "ping"]
    assert names[-2:] == ["message_delta", "message_stop"]
    assert all(e.event == e.data["type"] for e in events)

    starts = [e.data["content_block"] for e in events if e.event == "content_block_start"]
    assert [b["type"] for b in starts] == ["text", "tool_use"]
    assert starts[1]["name"] == "Bash"
    partial = "".join(
        e.data["delta"]["partial_json"]
        for e in events
        if e.event == "content_block_delta" and e.data["index"] == 1
    )
    assert json.loads(partial)["command"] == "echo hello > out.txt"
    assert events[-2].data["delta"]["stop_reason"] == "tool_use"
    assert events[0].data["message"]["model"] == "claude-opus-5-5"


def test_text_and_thinking_stream_end_turn(model_server: ModelServer) -> None:
    model_server.script([thinking("let me think", "answer"), text("a long reply", chunks=4)])
    first = parse_sse(post(model_server, claude_body(first_turn("q"))).content)
    kinds = [e.data["content_block"]["type"] for e in first if e.event == "content_block_start"]
    assert kinds == ["thinking", "text"]
    deltas = [e.data["delta"]["type"] for e in first if e.event == "content_block_delta"]
    assert deltas == ["thinking_delta", "signature_delta", "text_delta"]

    second = parse_sse(post(model_server, claude_body(first_turn("q"))).content)
    pieces = [e.data["delta"]["text"] for e in second if e.event == "content_block_delta"]
    assert len(pieces) == 4
    assert "".join(pieces) == "a long reply"
    assert second[-2].data["delta"]["stop_reason"] == "end_turn"


def test_relative_write_path_resolves_against_claude_cwd(model_server: ModelServer) -> None:
    model_server.script([write_file("notes/a.txt", "hi\n")])
    events = parse_sse(post(model_server, claude_body(first_turn("write"))).content)
    tool = next(e.data["content_block"] for e in events if e.event == "content_block_start")
    assert tool["name"] == "Write"
    partial = "".join(
        e.data["delta"]["partial_json"] for e in events if e.event == "content_block_delta"
    )
    assert json.loads(partial) == {
        "file_path": "/work/demo/claude/r_wd/notes/a.txt",
        "content": "hi\n",
    }


def test_model_check_is_plain_json_and_consumes_nothing(model_server: ModelServer) -> None:
    model_server.script([text("scripted")])
    check = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 1,
        "messages": [{"role": "user", "content": "Hi"}],
    }
    response = post(model_server, check)

    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert body["type"] == "message"
    assert body["model"] == "claude-sonnet-4-5"
    assert body["content"] == [{"type": "text", "text": "ok"}]
    assert model_server.remaining_turns() == 1
    assert [r.kind for r in model_server.requests] == ["side"]


def _helper_query(tools: list[Any]) -> dict[str, Any]:
    return {
        "model": "claude-haiku-4-5",
        "stream": True,
        "max_tokens": 512,
        "tools": tools,
        "system": [{"type": "text", "text": "Extract any file paths that this command reads"}],
        "messages": [{"role": "user", "content": "Command: echo hi > a.txt\nOutput: \n"}],
    }


def test_streamed_helper_query_is_a_side_call(model_server: ModelServer) -> None:
    model_server.script([text("scripted")])
    response = post(model_server, _helper_query([]))

    assert response.headers["content-type"].startswith("text/event-stream")
    deltas = [e.data["delta"] for e in parse_sse(response.content) if "delta" in e.data]
    assert "<filepaths>" in "".join(d.get("text", "") for d in deltas)
    assert model_server.remaining_turns() == 1
    assert [r.kind for r in model_server.requests] == ["side"]


def test_the_same_prompt_with_tools_is_a_turn(model_server: ModelServer) -> None:
    model_server.script([text("scripted")])
    post(model_server, _helper_query([{"name": "Bash", "input_schema": {}}]))
    assert model_server.remaining_turns() == 0


@pytest.mark.parametrize(
    ("kind", "status", "etype"),
    [
        ("rate_limit", 429, "rate_limit_error"),
        ("quota", 429, "rate_limit_error"),
        ("overloaded", 529, "overloaded_error"),
        ("server_error", 500, "api_error"),
        ("bad_request", 400, "invalid_request_error"),
        ("context_overflow", 400, "invalid_request_error"),
        ("auth", 401, "authentication_error"),
    ],
)
def test_error_bodies(model_server: ModelServer, kind: Any, status: int, etype: str) -> None:
    model_server.script([error(kind)])
    response = post(model_server, claude_body(first_turn("x")))
    assert response.status_code == status
    body = response.json()
    assert body["type"] == "error"
    assert body["error"]["type"] == etype
    assert body["error"]["message"]
    assert response.headers["request-id"]
    if kind == "quota":
        # Why quota is terminal for Claude Code: the SDK obeys x-should-retry.
        assert response.headers["x-should-retry"] == "false"
    if kind == "rate_limit":
        assert response.headers["retry-after"] == "1"


def test_request_reading_skips_reminders_and_system_entries(model_server: ModelServer) -> None:
    model_server.script([text("one"), text("two")])
    post(model_server, claude_body(first_turn("make out.txt")))
    history = [
        *first_turn("make out.txt"),
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {}}],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": [{"type": "text", "text": "hello"}],
                    "is_error": False,
                }
            ],
        },
    ]
    post(model_server, claude_body(history))

    first, second = model_server.turn_requests()
    assert first.last_user_text() == "make out.txt"
    assert first.working_dir() == "/work/demo/claude/r_wd"
    assert not first.has_tool_result
    assert second.last_user_text() == "make out.txt"
    result = second.last_tool_result()
    assert result is not None
    assert (result.call_id, result.name, result.content, result.is_error) == (
        "toolu_1",
        "Bash",
        "hello",
        False,
    )
    assert second.headers["content-type"] == "application/json"
    assert second.turn_index == 1


@pytest.mark.parametrize("path", ["/", "/api/hello"])
def test_head_probes_answer_200(model_server: ModelServer, path: str) -> None:
    response = httpx.head(model_server.url + path, timeout=5)
    assert response.status_code == 200
    assert model_server.requests[-1].kind == "other"
