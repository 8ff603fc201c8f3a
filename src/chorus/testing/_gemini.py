"""Gemini API (Gemini CLI): SSE rendering, side calls, errors, request reading."""

from __future__ import annotations

import re
from typing import Any

from chorus.testing._scenario import (
    ErrorKind,
    Reply,
    Shell,
    Text,
    Thinking,
    ToolCall,
    WriteFile,
    split_chunks,
)
from chorus.testing._wire import (
    JsonReply,
    RenderContext,
    SseEvent,
    ToolResult,
    dumps,
    is_injected_text,
    text_of,
)

DEFAULT_MODEL = "gemini-2.5-flash"
_PATH = re.compile(r"/v1(?:beta|alpha)?/models/(?P<model>[^/:]+):(?P<op>[A-Za-z]+)$")
_WORKSPACE = re.compile(r"Workspace Directories:\**\s*\n\s*-\s*(\S+)")
_WORKING_IN = re.compile(r"working in the directory:\s*(\S+)")
_USAGE = {"promptTokenCount": 100, "candidatesTokenCount": 20, "totalTokenCount": 120}


def parse_path(path: str) -> tuple[str, str] | None:
    """``(model, operation)`` of a ``/v1beta/models/{model}:{op}`` path (query stripped)."""
    found = _PATH.search(path.split("?", 1)[0])
    return (found.group("model"), found.group("op")) if found else None


def is_turn_request(operation: str) -> bool:
    """Only the streaming call is the main agent loop; router/title calls are not."""
    return operation == "streamGenerateContent"


def side_reply(operation: str, model: str, body: Any) -> JsonReply:
    """Answer a non-streaming call (router, title, token count) without consuming a turn."""
    if operation == "countTokens":
        return JsonReply(200, {"totalTokens": 100})
    return JsonReply(200, _candidate_body([{"text": _side_text(body)}], model, "side"))


def _side_text(body: Any) -> str:
    config = body.get("generationConfig") if isinstance(body, dict) else None
    if not isinstance(config, dict) or config.get("responseMimeType") != "application/json":
        return "Scripted session"
    schema = dumps(config.get("responseJsonSchema") or config.get("responseSchema") or {})
    if "complexity_score" in schema:
        # 15 keeps the router on the flash model (AGENT_CLIS.md 3.3).
        return dumps({"complexity_reasoning": "Simple scripted task.", "complexity_score": 15})
    if "next_speaker" in schema:
        return dumps({"reasoning": "The model finished its turn.", "next_speaker": "user"})
    return "{}"


def _candidate_body(
    parts: list[dict[str, Any]], model: str, response_id: str, *, final: bool = True
) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    body: dict[str, Any] = {"candidates": [candidate]}
    if final:
        candidate["finishReason"] = "STOP"
        body["usageMetadata"] = dict(_USAGE)
    body["modelVersion"] = model
    body["responseId"] = response_id
    return body


def render(reply: Reply, ctx: RenderContext) -> list[SseEvent]:
    """SSE ``data:`` chunks for ``reply``; finishReason and usage ride on the last one."""
    chunks: list[tuple[dict[str, Any], bool]] = []
    for block in reply.blocks:
        if isinstance(block, Text):
            chunks += [({"text": p}, True) for p in split_chunks(block.text, block.chunks)]
        elif isinstance(block, Thinking):
            chunks.append(({"text": block.text, "thought": True}, True))
        else:
            name, args = _function_call(block, ctx)
            chunks.append(({"functionCall": {"name": name, "args": args}}, True))
    response_id = ctx.new_id("resp")
    events: list[SseEvent] = []
    for i, (part, paced) in enumerate(chunks):
        body = _candidate_body([part], ctx.model, response_id, final=i == len(chunks) - 1)
        events.append(SseEvent(f"data: {dumps(body)}\r\n\r\n".encode(), paced))
    return events


def _function_call(block: Shell | WriteFile | ToolCall, ctx: RenderContext) -> tuple[str, Any]:
    if isinstance(block, Shell):
        return "run_shell_command", {"command": block.command, "description": block.description}
    if isinstance(block, WriteFile):
        return "write_file", {"file_path": ctx.resolve(block.path), "content": block.content}
    return block.name, dict(block.arguments)


_DOCS = "https://ai.google.dev/gemini-api/docs/rate-limits"
_METRIC = "generativelanguage.googleapis.com/generate_content_free_tier_requests"
_QUOTA_MESSAGE = (
    "You exceeded your current quota, please check your plan and billing details. For more "
    f"information on this error, head to: {_DOCS}.\n* Quota exceeded for metric: "
    "generativelanguage.googleapis.com/generate_content_free_tier_requests, limit: {limit}"
)


def _quota_violation(quota_id: str, limit: str) -> dict[str, Any]:
    return {
        "@type": "type.googleapis.com/google.rpc.QuotaFailure",
        "violations": [
            {
                "quotaMetric": _METRIC,
                "quotaId": quota_id,
                "quotaDimensions": {"location": "global", "model": DEFAULT_MODEL},
                "quotaValue": limit,
            }
        ],
    }


def _google_error(
    code: int, status: str, message: str, details: list[dict[str, Any]] | None = None
) -> JsonReply:
    error: dict[str, Any] = {"code": code, "message": message, "status": status}
    if details is not None:
        error["details"] = details
    return JsonReply(code, {"error": error})


def error_reply(kind: ErrorKind) -> JsonReply:
    """The real Gemini API error for ``kind``.

    ``quota``/``usage_limit`` are the per-day QuotaFailure the CLI treats as
    terminal; ``rate_limit`` is the per-minute one with RetryInfo, which it
    retries. ``auth`` is what the API really sends for a bad key: 400
    INVALID_ARGUMENT with reason API_KEY_INVALID (not 401).
    """
    if kind in ("quota", "usage_limit"):
        details = [
            _quota_violation("GenerateRequestsPerDayPerProjectPerModel-FreeTier", "250"),
            {
                "@type": "type.googleapis.com/google.rpc.Help",
                "links": [{"description": "Learn more about Gemini API quotas", "url": _DOCS}],
            },
        ]
        message = _QUOTA_MESSAGE.format(limit=250)
        return _google_error(429, "RESOURCE_EXHAUSTED", message, details)
    if kind == "rate_limit":
        details = [
            _quota_violation("GenerateRequestsPerMinutePerProjectPerModel-FreeTier", "10"),
            {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "1s"},
        ]
        message = _QUOTA_MESSAGE.format(limit=10) + "\nPlease retry in 1.5s."
        return _google_error(429, "RESOURCE_EXHAUSTED", message, details)
    if kind == "overloaded":
        message = "The model is overloaded. Please try again later."
        return _google_error(503, "UNAVAILABLE", message)
    if kind == "server_error":
        message = (
            "An internal error has occurred. Please retry or report in "
            "https://developers.generativeai.google/guide/troubleshooting"
        )
        return _google_error(500, "INTERNAL", message)
    if kind == "context_overflow":
        message = (
            "The input token count (1200000) exceeds the maximum number of tokens allowed "
            "(1048576)."
        )
        return _google_error(400, "INVALID_ARGUMENT", message)
    if kind == "auth":
        details = [
            {
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": "API_KEY_INVALID",
                "domain": "googleapis.com",
                "metadata": {"service": "generativelanguage.googleapis.com"},
            }
        ]
        message = "API key not valid. Please pass a valid API key."
        return _google_error(400, "INVALID_ARGUMENT", message, details)
    return _google_error(400, "INVALID_ARGUMENT", "Request contains an invalid argument.")


def _contents(body: Any) -> list[dict[str, Any]]:
    if not isinstance(body, dict) or not isinstance(body.get("contents"), list):
        return []
    return [c for c in body["contents"] if isinstance(c, dict)]


def _parts(content: dict[str, Any]) -> list[dict[str, Any]]:
    parts = content.get("parts")
    return [p for p in parts if isinstance(p, dict)] if isinstance(parts, list) else []


def last_user_text(body: Any) -> str | None:
    """The last user text part that is not the ``<session_context>`` preamble or a thought."""
    for content in reversed(_contents(body)):
        if content.get("role") != "user":
            continue
        texts = [
            str(p["text"])
            for p in _parts(content)
            if isinstance(p.get("text"), str)
            and not p.get("thought")
            and not is_injected_text(str(p["text"]))
        ]
        if texts:
            return texts[-1]
    return None


def tool_results(body: Any) -> list[ToolResult]:
    """Every ``functionResponse`` part, oldest first (``response.error`` marks failure)."""
    results: list[ToolResult] = []
    for content in _contents(body):
        for part in _parts(content):
            response = part.get("functionResponse")
            if not isinstance(response, dict):
                continue
            payload = response.get("response")
            payload = payload if isinstance(payload, dict) else {}
            is_error = "error" in payload and "output" not in payload
            value = payload.get("error") if is_error else payload.get("output", payload)
            call_id = response.get("id")
            results.append(
                ToolResult(
                    call_id=str(call_id) if call_id is not None else None,
                    name=str(response.get("name")) if response.get("name") else None,
                    content=text_of(value),
                    is_error=is_error,
                )
            )
    return results


def working_dir(body: Any) -> str | None:
    """The workspace directory from the ``<session_context>`` preamble."""
    for content in _contents(body):
        for part in _parts(content):
            text = part.get("text")
            if not isinstance(text, str):
                continue
            found = _WORKSPACE.search(text) or _WORKING_IN.search(text)
            if found:
                return found.group(1)
    return None
