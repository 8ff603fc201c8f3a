"""OpenAI Responses API rendering, compaction side call, errors and request reading."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from chorus.testing import (
    ModelServer,
    error,
    parse_sse,
    shell,
    text,
    thinking,
    tool_call,
    write_file,
)
from chorus.testing._openai import COMPACTION_PREFIX, apply_patch_text

ENV_CONTEXT = (
    "<environment_context>\n  <cwd>/work/demo/codex/w1</cwd>\n  <shell>bash</shell>\n"
    "</environment_context>"
)


def user(text_: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text_}]}


def codex_body(*extra: dict[str, Any], prompt: str = "make out.txt") -> dict[str, Any]:
    """A trimmed Codex request: developer prompt, environment context, the prompt, history."""
    developer = {
        "type": "message",
        "role": "developer",
        "content": [{"type": "input_text", "text": "You are Codex"}],
    }
    items = [developer, user(ENV_CONTEXT), user(prompt), *extra]
    return {"model": "gpt-5.5", "stream": True, "input": items}


def post(server: ModelServer, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(server.url + "/v1/responses", json=body, timeout=10)


def test_function_call_stream(model_server: ModelServer) -> None:
    model_server.script([shell("echo hello > out.txt")])
    response = post(model_server, codex_body())

    assert response.status_code == 200
    assert response.headers["content-type"] == "text/event-stream"
    assert response.headers["connection"] == "close"
    events = parse_sse(response.content)
    assert [e.data["sequence_number"] for e in events] == list(range(len(events)))
    assert [e.event for e in events] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ]
    done = events[-2].data["item"]
    assert done["type"] == "function_call"
    assert done["name"] == "exec_command"
    assert json.loads(done["arguments"]) == {"cmd": "echo hello > out.txt", "yield_time_ms": 10000}
    deltas = "".join(e.data["delta"] for e in events if e.event.endswith("arguments.delta"))
    assert deltas == done["arguments"]
    completed = events[-1].data["response"]
    assert completed["status"] == "completed"
    assert completed["output"] == [done]
    assert completed["usage"]["total_tokens"] == 120


def test_text_and_reasoning_items(model_server: ModelServer) -> None:
    model_server.script([thinking("plan it", "done now")])
    events = parse_sse(post(model_server, codex_body()).content)
    added = [e.data["item"]["type"] for e in events if e.event == "response.output_item.added"]
    assert added == ["reasoning", "message"]
    kinds = {e.event for e in events}
    assert {
        "response.reasoning_summary_part.added",
        "response.reasoning_summary_text.delta",
        "response.reasoning_summary_text.done",
        "response.reasoning_summary_part.done",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
    } <= kinds
    message = events[-1].data["response"]["output"][1]
    assert message["content"][0]["text"] == "done now"
    assert events[-1].data["response"]["output"][0]["summary"][0]["text"] == "plan it"


def test_apply_patch_is_a_custom_tool_call(model_server: ModelServer) -> None:
    model_server.script([write_file("notes.txt", "one\ntwo\n")])
    events = parse_sse(post(model_server, codex_body()).content)
    done = next(e.data["item"] for e in events if e.event == "response.output_item.done")
    assert done["type"] == "custom_tool_call"
    assert done["name"] == "apply_patch"
    assert done["input"] == "*** Begin Patch\n*** Add File: notes.txt\n+one\n+two\n*** End Patch\n"
    streamed = "".join(
        e.data["delta"] for e in events if e.event == "response.custom_tool_call_input.delta"
    )
    assert streamed == done["input"]


def test_apply_patch_text_adds_missing_final_newline() -> None:
    assert apply_patch_text("a", "x") == "*** Begin Patch\n*** Add File: a\n+x\n*** End Patch\n"


def test_generic_tool_call_is_a_function_call(model_server: ModelServer) -> None:
    model_server.script([tool_call("view_image", {"path": "a.png"})])
    events = parse_sse(post(model_server, codex_body()).content)
    done = events[-1].data["response"]["output"][0]
    assert (done["name"], json.loads(done["arguments"])) == ("view_image", {"path": "a.png"})


def test_compaction_request_is_a_side_call(model_server: ModelServer) -> None:
    model_server.script([text("scripted")])
    prompt = f"{COMPACTION_PREFIX}. Summarize."
    events = parse_sse(post(model_server, codex_body(prompt=prompt)).content)
    assert events[-1].event == "response.completed"
    assert model_server.remaining_turns() == 1
    assert model_server.requests[-1].kind == "side"


@pytest.mark.parametrize(
    ("kind", "status", "code"),
    [
        ("rate_limit", 429, "rate_limit_exceeded"),
        ("quota", 429, "insufficient_quota"),
        ("server_error", 500, "server_error"),
        ("auth", 401, "invalid_api_key"),
        ("context_overflow", 400, "context_length_exceeded"),
        ("overloaded", 503, "server_is_overloaded"),
    ],
)
def test_error_bodies(model_server: ModelServer, kind: Any, status: int, code: str) -> None:
    model_server.script([error(kind)])
    response = post(model_server, codex_body())
    assert response.status_code == status
    body = response.json()["error"]
    assert body["code"] == code
    assert set(body) == {"message", "type", "param", "code"}
    if kind == "rate_limit":
        assert response.headers["retry-after"] == "1"
        assert response.headers["x-ratelimit-reset-requests"] == "1s"


def test_usage_limit_body_is_the_chatgpt_plan_shape(model_server: ModelServer) -> None:
    model_server.script([error("usage_limit")])
    response = post(model_server, codex_body())
    assert response.status_code == 429
    body = response.json()["error"]
    assert body["type"] == "usage_limit_reached"
    assert body["resets_in_seconds"] == 3600
    assert isinstance(body["resets_at"], int)


def test_request_reading_skips_environment_context(model_server: ModelServer) -> None:
    model_server.script([text("a")])
    call = {"type": "function_call", "name": "exec_command", "arguments": "{}", "call_id": "c1"}
    output = {
        "type": "function_call_output",
        "call_id": "c1",
        "output": "Process exited with code 0",
    }
    patch = {"type": "custom_tool_call", "name": "apply_patch", "input": "...", "call_id": "c2"}
    patched = {"type": "custom_tool_call_output", "call_id": "c2", "output": "Success."}
    post(model_server, codex_body(call, output, patch, patched))

    request = model_server.turn_requests()[0]
    assert request.last_user_text() == "make out.txt"
    assert request.working_dir() == "/work/demo/codex/w1"
    results = request.tool_results()
    assert [(r.call_id, r.name, r.content) for r in results] == [
        ("c1", "exec_command", "Process exited with code 0"),
        ("c2", "apply_patch", "Success."),
    ]
