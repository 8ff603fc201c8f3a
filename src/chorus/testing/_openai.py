"""OpenAI Responses API (Codex CLI): SSE rendering, errors, request reading."""

from __future__ import annotations

import re
import time
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

DEFAULT_MODEL = "gpt-5.5"
COMPACTION_PREFIX = "You are performing a CONTEXT CHECKPOINT COMPACTION"
_CWD = re.compile(r"<cwd>(.*?)</cwd>", re.DOTALL)


def side_reply(body: Any) -> Reply | None:
    """The answer to a side call (Codex's automatic context compaction), else ``None``.

    Compaction is an ordinary ``/responses`` call whose last user text starts with
    the checkpoint prompt; it must not eat a scripted turn.
    """
    prompt = last_user_text(body) or ""
    if prompt.startswith(COMPACTION_PREFIX):
        return Reply(blocks=(Text(text="Summary of the conversation so far (fake)."),))
    return None


class _Stream:
    """Builds the event list of one response, numbering ``sequence_number`` as it goes."""

    def __init__(self, ctx: RenderContext) -> None:
        self.ctx = ctx
        self.events: list[SseEvent] = []
        self.output: list[dict[str, Any]] = []
        self.response_id = ctx.new_id("resp")
        self.created_at = int(time.time())

    def emit(self, kind: str, payload: dict[str, Any], *, paced: bool = False) -> None:
        data = {"type": kind, "sequence_number": len(self.events), **payload}
        self.events.append(SseEvent(f"event: {kind}\ndata: {dumps(data)}\n\n".encode(), paced))

    def response(self, status: str, *, usage: bool = False) -> dict[str, Any]:
        body: dict[str, Any] = {
            "id": self.response_id,
            "object": "response",
            "created_at": self.created_at,
            "model": self.ctx.model,
            "status": status,
            "output": list(self.output) if status == "completed" else [],
        }
        if usage:
            body["usage"] = {
                "input_tokens": 100,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": 20,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": 120,
            }
        return body

    def item(
        self, added: dict[str, Any], done: dict[str, Any], deltas: list[tuple[str, Any]]
    ) -> None:
        """Emit one output item: added, its (kind, payload) deltas, done."""
        index = len(self.output)
        self.emit("response.output_item.added", {"output_index": index, "item": added})
        for kind, payload in deltas:
            paced = kind.endswith(".delta")
            self.emit(kind, {"item_id": added["id"], "output_index": index, **payload}, paced=paced)
        self.emit("response.output_item.done", {"output_index": index, "item": done})
        self.output.append(done)


def render(reply: Reply, ctx: RenderContext) -> list[SseEvent]:
    """The SSE events of one Responses stream carrying ``reply``'s blocks."""
    stream = _Stream(ctx)
    stream.emit("response.created", {"response": stream.response("in_progress")})
    stream.emit("response.in_progress", {"response": stream.response("in_progress")})
    for block in reply.blocks:
        if isinstance(block, Text):
            _message(stream, block)
        elif isinstance(block, Thinking):
            _reasoning(stream, block)
        elif isinstance(block, WriteFile):
            _apply_patch(stream, block)
        else:
            _function_call(stream, block)
    stream.emit("response.completed", {"response": stream.response("completed", usage=True)})
    return stream.events


def _message(stream: _Stream, block: Text) -> None:
    item_id = stream.ctx.new_id("msg")
    part = {"type": "output_text", "text": block.text, "annotations": []}
    at = {"content_index": 0}
    deltas: list[tuple[str, Any]] = [
        ("response.content_part.added", {**at, "part": {**part, "text": ""}}),
        *(
            ("response.output_text.delta", {**at, "delta": piece})
            for piece in split_chunks(block.text, block.chunks)
        ),
        ("response.output_text.done", {**at, "text": block.text}),
        ("response.content_part.done", {**at, "part": part}),
    ]
    base = {"type": "message", "id": item_id, "role": "assistant"}
    stream.item(
        {**base, "status": "in_progress", "content": []},
        {**base, "status": "completed", "content": [part]},
        deltas,
    )


def _reasoning(stream: _Stream, block: Thinking) -> None:
    item_id = stream.ctx.new_id("rs")
    part = {"type": "summary_text", "text": block.text}
    at = {"summary_index": 0}
    deltas: list[tuple[str, Any]] = [
        ("response.reasoning_summary_part.added", {**at, "part": {**part, "text": ""}}),
        ("response.reasoning_summary_text.delta", {**at, "delta": block.text}),
        ("response.reasoning_summary_text.done", {**at, "text": block.text}),
        ("response.reasoning_summary_part.done", {**at, "part": part}),
    ]
    base = {"type": "reasoning", "id": item_id}
    stream.item({**base, "summary": []}, {**base, "summary": [part]}, deltas)


def _function_call(stream: _Stream, block: Shell | ToolCall) -> None:
    if isinstance(block, Shell):
        name, arguments = "exec_command", dumps({"cmd": block.command, "yield_time_ms": 10000})
    else:
        name, arguments = block.name, dumps(block.arguments)
    base = {
        "type": "function_call",
        "id": stream.ctx.new_id("fc"),
        "call_id": stream.ctx.new_id("call"),
        "name": name,
    }
    if isinstance(block, ToolCall) and block.namespace:
        base["namespace"] = block.namespace
    deltas: list[tuple[str, Any]] = [
        *(
            ("response.function_call_arguments.delta", {"delta": piece})
            for piece in split_chunks(arguments, 3)
        ),
        ("response.function_call_arguments.done", {"arguments": arguments}),
    ]
    stream.item(
        {**base, "arguments": "", "status": "in_progress"},
        {**base, "arguments": arguments, "status": "completed"},
        deltas,
    )


def apply_patch_text(path: str, content: str) -> str:
    """An apply_patch ``Add File`` patch creating ``path`` with ``content`` (lines end in LF)."""
    lines = "".join(f"+{line}\n" for line in content.splitlines())
    return f"*** Begin Patch\n*** Add File: {path}\n{lines}*** End Patch\n"


def _apply_patch(stream: _Stream, block: WriteFile) -> None:
    patch = apply_patch_text(block.path, block.content)
    base = {
        "type": "custom_tool_call",
        "id": stream.ctx.new_id("ctc"),
        "call_id": stream.ctx.new_id("call"),
        "name": "apply_patch",
    }
    deltas: list[tuple[str, Any]] = [
        *(
            ("response.custom_tool_call_input.delta", {"delta": piece})
            for piece in split_chunks(patch, 3)
        ),
        ("response.custom_tool_call_input.done", {"input": patch}),
    ]
    stream.item(
        {**base, "input": "", "status": "in_progress"},
        {**base, "input": patch, "status": "completed"},
        deltas,
    )


def _openai_error(
    message: str, etype: str, code: str | None, param: str | None = None
) -> dict[str, Any]:
    return {"error": {"message": message, "type": etype, "param": param, "code": code}}


def error_reply(kind: ErrorKind) -> JsonReply:
    """The real OpenAI error response for ``kind`` (status, body, headers)."""
    if kind == "rate_limit":
        body = _openai_error(
            "Rate limit reached for requests. Please try again in 1s.",
            "requests",
            "rate_limit_exceeded",
        )
        headers = (("retry-after", "1"), ("x-ratelimit-reset-requests", "1s"))
        return JsonReply(429, body, headers)
    if kind == "quota":
        message = "You exceeded your current quota, please check your plan and billing details."
        return JsonReply(429, _openai_error(message, "insufficient_quota", "insufficient_quota"))
    if kind == "usage_limit":
        body = {
            "error": {
                "type": "usage_limit_reached",
                "message": "The usage limit has been reached",
                "plan_type": "plus",
                "resets_at": int(time.time()) + 3600,
                "resets_in_seconds": 3600,
            }
        }
        return JsonReply(429, body)
    if kind == "overloaded":
        message = "The server is overloaded or not ready yet."
        return JsonReply(503, _openai_error(message, "server_error", "server_is_overloaded"))
    if kind == "server_error":
        message = "The server had an error while processing your request."
        return JsonReply(500, _openai_error(message, "server_error", "server_error"))
    if kind == "auth":
        message = "Incorrect API key provided: dummy."
        return JsonReply(401, _openai_error(message, "invalid_request_error", "invalid_api_key"))
    if kind == "context_overflow":
        message = "Your input exceeds the context window of this model."
        body = _openai_error(message, "invalid_request_error", "context_length_exceeded", "input")
        return JsonReply(400, body)
    message = "Invalid request (fake injected error)."
    return JsonReply(400, _openai_error(message, "invalid_request_error", None))


def model_of(body: Any) -> str:
    """The model the request asked for."""
    if isinstance(body, dict) and isinstance(body.get("model"), str):
        return str(body["model"])
    return DEFAULT_MODEL


def _items(body: Any) -> list[dict[str, Any]]:
    if not isinstance(body, dict) or not isinstance(body.get("input"), list):
        return []
    return [i for i in body["input"] if isinstance(i, dict)]


def _texts(item: dict[str, Any]) -> list[str]:
    content = item.get("content")
    if isinstance(content, str):
        return [content]
    if isinstance(content, list):
        return [str(p.get("text", "")) for p in content if isinstance(p, dict) and "text" in p]
    return []


def _is_message(item: dict[str, Any], role: str) -> bool:
    return item.get("type", "message") == "message" and item.get("role") == role


def last_user_text(body: Any) -> str | None:
    """Text of the last user message that is not injected context.

    Codex's input opens with developer messages and an ``<environment_context>``
    user message before the prompt.
    """
    for item in reversed(_items(body)):
        if not _is_message(item, "user"):
            continue
        texts = [t for t in _texts(item) if not is_injected_text(t)]
        if texts:
            return texts[-1]
    return None


def tool_results(body: Any) -> list[ToolResult]:
    """Every ``function_call_output`` / ``custom_tool_call_output`` item, oldest first."""
    names: dict[str, str] = {}
    results: list[ToolResult] = []
    for item in _items(body):
        kind = item.get("type")
        call_id = str(item.get("call_id"))
        if kind in ("function_call", "custom_tool_call"):
            names[call_id] = str(item.get("name"))
        elif kind in ("function_call_output", "custom_tool_call_output"):
            output = item.get("output")
            is_error = False
            if isinstance(output, dict):
                # Structured output form: {"content": ..., "success": bool}.
                is_error = output.get("success") is False
                output = output.get("content")
            results.append(ToolResult(call_id, names.get(call_id), text_of(output), is_error))
    return results


def working_dir(body: Any) -> str | None:
    """The cwd from Codex's ``<environment_context>`` message."""
    for item in _items(body):
        for text in _texts(item):
            found = _CWD.search(text)
            if found:
                return found.group(1).strip()
    return None
