"""Gemini API rendering, router/title side calls, errors and request reading."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from chorus.testing import ModelServer, error, parse_sse, shell, text, thinking, write_file

SESSION_CONTEXT = (
    "<session_context>\nThis is the Gemini CLI.\n- **Workspace Directories:**\n"
    "  - /work/demo/gemini/ws3\n- **Directory Structure:**\n</session_context>"
)


def gemini_body(*extra: dict[str, Any]) -> dict[str, Any]:
    """A trimmed Gemini request: session context part and prompt in the first user content."""
    first = {"role": "user", "parts": [{"text": SESSION_CONTEXT}, {"text": "make out.txt"}]}
    return {"contents": [first, *extra], "generationConfig": {"temperature": 1}}


def stream_url(server: ModelServer, model: str = "gemini-2.5-flash") -> str:
    return f"{server.url}/v1beta/models/{model}:streamGenerateContent?alt=sse"


def test_function_call_stream_uses_crlf_framing(model_server: ModelServer) -> None:
    model_server.script([shell("echo hi > out.txt", say="On it.")])
    response = httpx.post(stream_url(model_server), json=gemini_body(), timeout=10)

    assert response.status_code == 200
    assert response.headers["content-type"] == "text/event-stream"
    assert response.content.startswith(b"data: {")
    assert response.content.endswith(b"}\r\n\r\n")
    assert b"event:" not in response.content
    chunks = [m.data for m in parse_sse(response.content)]
    assert len(chunks) == 2
    assert chunks[0]["candidates"][0]["content"]["parts"] == [{"text": "On it."}]
    assert "finishReason" not in chunks[0]["candidates"][0]
    assert "usageMetadata" not in chunks[0]
    last = chunks[-1]
    assert last["candidates"][0]["finishReason"] == "STOP"
    assert last["usageMetadata"]["totalTokenCount"] == 120
    call = last["candidates"][0]["content"]["parts"][0]["functionCall"]
    assert call["name"] == "run_shell_command"
    assert call["args"]["command"] == "echo hi > out.txt"
    assert last["modelVersion"] == "gemini-2.5-flash"


def test_any_model_name_and_thoughts(model_server: ModelServer) -> None:
    model_server.script([thinking("pondering", "answer")])
    response = httpx.post(
        stream_url(model_server, "gemini-9-ultra"), json=gemini_body(), timeout=10
    )
    parts = [m.data["candidates"][0]["content"]["parts"][0] for m in parse_sse(response.content)]
    assert parts == [{"text": "pondering", "thought": True}, {"text": "answer"}]


def test_write_file_path_resolves_against_workspace(model_server: ModelServer) -> None:
    model_server.script([write_file("note.txt", "hi\n")])
    response = httpx.post(stream_url(model_server), json=gemini_body(), timeout=10)
    part = parse_sse(response.content)[-1].data["candidates"][0]["content"]["parts"][0]
    assert part["functionCall"] == {
        "name": "write_file",
        "args": {"file_path": "/work/demo/gemini/ws3/note.txt", "content": "hi\n"},
    }


def test_router_call_answers_complexity_without_consuming(model_server: ModelServer) -> None:
    model_server.script([text("scripted")])
    schema = {
        "type": "OBJECT",
        "properties": {
            "complexity_reasoning": {"type": "STRING"},
            "complexity_score": {"type": "INTEGER"},
        },
    }
    body = gemini_body()
    body["generationConfig"] = {
        "responseMimeType": "application/json",
        "responseJsonSchema": schema,
    }
    url = f"{model_server.url}/v1beta/models/gemini-3.5-flash-lite:generateContent"
    response = httpx.post(url, json=body, timeout=10)

    assert response.headers["content-type"] == "application/json"
    candidate = response.json()["candidates"][0]
    answer = json.loads(candidate["content"]["parts"][0]["text"])
    assert answer["complexity_score"] == 15
    assert isinstance(answer["complexity_reasoning"], str)
    assert candidate["finishReason"] == "STOP"
    assert model_server.remaining_turns() == 1
    assert model_server.requests[-1].kind == "side"


def test_title_call_is_a_side_call(model_server: ModelServer) -> None:
    model_server.script([text("scripted")])
    url = f"{model_server.url}/v1beta/models/gemini-3.5-flash-lite:generateContent"
    response = httpx.post(url, json=gemini_body(), timeout=10)
    assert response.json()["candidates"][0]["content"]["parts"][0]["text"]
    assert model_server.remaining_turns() == 1


def test_daily_quota_has_quota_failure_details(model_server: ModelServer) -> None:
    model_server.script([error("quota")])
    response = httpx.post(stream_url(model_server), json=gemini_body(), timeout=10)
    assert response.status_code == 429
    body = response.json()["error"]
    assert (body["code"], body["status"]) == (429, "RESOURCE_EXHAUSTED")
    types = [d["@type"] for d in body["details"]]
    assert types == [
        "type.googleapis.com/google.rpc.QuotaFailure",
        "type.googleapis.com/google.rpc.Help",
    ]
    quota_id = body["details"][0]["violations"][0]["quotaId"]
    assert quota_id == "GenerateRequestsPerDayPerProjectPerModel-FreeTier"


def test_rate_limit_has_retry_info(model_server: ModelServer) -> None:
    model_server.script([error("rate_limit")])
    response = httpx.post(stream_url(model_server), json=gemini_body(), timeout=10)
    details = response.json()["error"]["details"]
    assert details[1] == {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "1s"}
    assert "PerMinute" in details[0]["violations"][0]["quotaId"]


@pytest.mark.parametrize(
    ("kind", "status", "grpc"),
    [
        ("server_error", 500, "INTERNAL"),
        ("overloaded", 503, "UNAVAILABLE"),
        ("bad_request", 400, "INVALID_ARGUMENT"),
        ("context_overflow", 400, "INVALID_ARGUMENT"),
        ("auth", 400, "INVALID_ARGUMENT"),
    ],
)
def test_other_errors(model_server: ModelServer, kind: Any, status: int, grpc: str) -> None:
    model_server.script([error(kind)])
    response = httpx.post(stream_url(model_server), json=gemini_body(), timeout=10)
    assert response.status_code == status
    body = response.json()["error"]
    assert (body["code"], body["status"]) == (status, grpc)
    if kind == "auth":
        assert body["details"][0]["reason"] == "API_KEY_INVALID"


def test_request_reading_skips_session_context(model_server: ModelServer) -> None:
    model_server.script([text("ok")])
    call = {"role": "model", "parts": [{"functionCall": {"name": "run_shell_command", "args": {}}}]}
    ok = {"name": "run_shell_command", "id": "rsc_1", "response": {"output": "Output: hi"}}
    failed = {"name": "read_file", "id": "rf_1", "response": {"error": "File not found"}}
    results = {"role": "user", "parts": [{"functionResponse": ok}, {"functionResponse": failed}]}
    httpx.post(stream_url(model_server), json=gemini_body(call, results), timeout=10)

    request = model_server.turn_requests()[0]
    assert request.last_user_text() == "make out.txt"
    assert request.working_dir() == "/work/demo/gemini/ws3"
    assert [(r.call_id, r.name, r.content, r.is_error) for r in request.tool_results()] == [
        ("rsc_1", "run_shell_command", "Output: hi", False),
        ("rf_1", "read_file", "File not found", True),
    ]
