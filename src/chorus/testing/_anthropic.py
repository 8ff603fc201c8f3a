"""Anthropic Messages API (Claude Code): SSE rendering, errors, request reading."""

from __future__ import annotations

import datetime
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

DEFAULT_MODEL = "claude-opus-5-5"
_INPUT_TOKENS = 100
_CWD = re.compile(r"Primary working directory:\s*(\S+)")


#: Openings of the system prompts of the small-model helper queries that Claude Code
#: streams beside the main agent, with no tools (claude-code-acp's bundled CLI runs the
#: first after every shell command, at a time that varies from run to run).
_HELPER_PROMPTS = (
    "Extract any file paths that this command",
    "Analyze if this message indicates a new conversation topic",
    "Generate a short kebab-case name",
    "You are given a few messages from a conversation",
    # The shell command's prefix check (claude-code-acp, seen in plan mode).
    "commands that an AI coding agent wants to run",
)
#: What a helper query gets: "no file contents shown, no paths".
SIDE_STREAM_TEXT = (
    "<is_displaying_contents>\nfalse\n</is_displaying_contents>\n\n<filepaths>\n</filepaths>"
)


def is_turn_request(body: Any) -> bool:
    """Main-agent calls stream; the ``max_tokens: 1`` model check after set_model does
    not, and streamed helper queries are side calls too."""
    return isinstance(body, dict) and body.get("stream") is True and not is_side_stream(body)


def is_side_stream(body: Any) -> bool:
    """A streamed helper query: no tools, and a known helper system prompt."""
    if not isinstance(body, dict) or body.get("stream") is not True or body.get("tools"):
        return False
    system = text_of(body.get("system"))
    return any(prompt in system for prompt in _HELPER_PROMPTS)


def side_reply(body: Any) -> JsonReply:
    """Plain JSON message answering a non-streaming call (never consumes a turn)."""
    model = _model(body)
    return JsonReply(
        200,
        {
            "id": "msg_side",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [{"type": "text", "text": "ok"}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": _usage(output_tokens=1),
        },
        (("request-id", "req_fake_side"),),
    )


def render(reply: Reply, ctx: RenderContext) -> list[SseEvent]:
    """The SSE events of one streamed assistant message carrying ``reply``'s blocks."""
    events = [
        _event(
            "message_start",
            {
                "message": {
                    "id": ctx.new_id("msg"),
                    "type": "message",
                    "role": "assistant",
                    "model": ctx.model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": _usage(output_tokens=1),
                }
            },
        ),
        _event("ping", {}),
    ]
    uses_tool = False
    for index, block in enumerate(reply.blocks):
        if isinstance(block, Text):
            events += _text_block(index, block)
        elif isinstance(block, Thinking):
            events += _thinking_block(index, block)
        else:
            uses_tool = True
            events += _tool_block(index, *_tool_call(block, ctx), ctx)
    stop = "tool_use" if uses_tool else "end_turn"
    events.append(
        _event(
            "message_delta",
            {
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": 20},
            },
        )
    )
    events.append(_event("message_stop", {}))
    return events


def _tool_call(block: Shell | WriteFile | ToolCall, ctx: RenderContext) -> tuple[str, Any]:
    if isinstance(block, Shell):
        return "Bash", {"command": block.command, "description": block.description}
    if isinstance(block, WriteFile):
        return "Write", {"file_path": ctx.resolve(block.path), "content": block.content}
    return block.name, dict(block.arguments)


def _text_block(index: int, block: Text) -> list[SseEvent]:
    events = [_event("content_block_start", {"index": index, "content_block": _empty_text()})]
    for piece in split_chunks(block.text, block.chunks):
        delta = {"type": "text_delta", "text": piece}
        events.append(_event("content_block_delta", {"index": index, "delta": delta}, paced=True))
    events.append(_event("content_block_stop", {"index": index}))
    return events


def _empty_text() -> dict[str, Any]:
    return {"type": "text", "text": ""}


def _thinking_block(index: int, block: Thinking) -> list[SseEvent]:
    start = {"type": "thinking", "thinking": "", "signature": ""}
    thought = {"type": "thinking_delta", "thinking": block.text}
    # Claude replays thinking blocks with their signature; any opaque value works offline.
    signature = {"type": "signature_delta", "signature": "fake-signature"}
    return [
        _event("content_block_start", {"index": index, "content_block": start}),
        _event("content_block_delta", {"index": index, "delta": thought}, paced=True),
        _event("content_block_delta", {"index": index, "delta": signature}),
        _event("content_block_stop", {"index": index}),
    ]


def _tool_block(index: int, name: str, arguments: Any, ctx: RenderContext) -> list[SseEvent]:
    start = {"type": "tool_use", "id": ctx.new_id("toolu"), "name": name, "input": {}}
    events = [_event("content_block_start", {"index": index, "content_block": start})]
    # Several partial_json pieces, as the real API sends, to exercise the CLI's reassembly.
    for piece in split_chunks(dumps(arguments), 3):
        delta = {"type": "input_json_delta", "partial_json": piece}
        events.append(_event("content_block_delta", {"index": index, "delta": delta}, paced=True))
    events.append(_event("content_block_stop", {"index": index}))
    return events


def _event(kind: str, payload: dict[str, Any], *, paced: bool = False) -> SseEvent:
    data = {"type": kind, **payload}
    return SseEvent(f"event: {kind}\ndata: {dumps(data)}\n\n".encode(), paced)


def _usage(*, output_tokens: int) -> dict[str, Any]:
    return {
        "input_tokens": _INPUT_TOKENS,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": output_tokens,
        "service_tier": "standard",
    }


# (status, error.type, message, extra headers) per error kind.
_ERRORS: dict[ErrorKind, tuple[int, str, str, tuple[tuple[str, str], ...]]] = {
    "rate_limit": (
        429,
        "rate_limit_error",
        "This request would exceed the rate limit for your organization of 50 requests per "
        "minute. For details, refer to: https://docs.claude.com/en/api/rate-limits.",
        (
            ("retry-after", "1"),
            ("anthropic-ratelimit-requests-limit", "50"),
            ("anthropic-ratelimit-requests-remaining", "0"),
        ),
    ),
    "quota": (
        429,
        "rate_limit_error",
        "You have reached your specified API usage limits. You will regain access on "
        "{regain} at 00:00 UTC.",
        (("x-should-retry", "false"),),
    ),
    "usage_limit": (
        429,
        "rate_limit_error",
        "You have reached your specified API usage limits. You will regain access on "
        "{regain} at 00:00 UTC.",
        (("x-should-retry", "false"),),
    ),
    "overloaded": (529, "overloaded_error", "Overloaded", ()),
    "server_error": (500, "api_error", "Internal server error", ()),
    "bad_request": (400, "invalid_request_error", "fake injected error", ()),
    "context_overflow": (
        400,
        "invalid_request_error",
        "prompt is too long: 210000 tokens > 200000 maximum",
        (),
    ),
    "auth": (401, "authentication_error", "invalid x-api-key", ()),
}


def regain_date(today: datetime.date | None = None) -> str:
    """When a quota error says access returns: the first day of next month (UTC)."""
    day = today or datetime.datetime.now(datetime.UTC).date()
    return (day.replace(day=28) + datetime.timedelta(days=4)).replace(day=1).isoformat()


def error_reply(kind: ErrorKind) -> JsonReply:
    """The real Anthropic error response for ``kind`` (status, body, headers)."""
    status, etype, message, headers = _ERRORS[kind]
    message = message.replace("{regain}", regain_date())
    body = {"type": "error", "error": {"type": etype, "message": message}}
    return JsonReply(status, body, (("request-id", "req_fake_error"), *headers))


def _model(body: Any) -> str:
    if isinstance(body, dict) and isinstance(body.get("model"), str):
        return str(body["model"])
    return DEFAULT_MODEL


def model_of(body: Any) -> str:
    """The model the request asked for (echoed back like the real API)."""
    return _model(body)


def _messages(body: Any) -> list[dict[str, Any]]:
    if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
        return []
    return [m for m in body["messages"] if isinstance(m, dict)]


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return [b for b in content if isinstance(b, dict)]
    return []


def last_user_text(body: Any) -> str | None:
    """Text of the last user message the human wrote, skipping tool results and reminders.

    Claude's ``messages`` may end with ``role: system`` entries and its user turns
    carry ``<system-reminder>`` blocks, so neither ``messages[-1]`` nor the first
    text block is the prompt.
    """
    for message in reversed(_messages(body)):
        if message.get("role") != "user":
            continue
        texts = [
            str(b.get("text", ""))
            for b in _blocks(message)
            if b.get("type") == "text" and not is_injected_text(str(b.get("text", "")))
        ]
        if texts:
            return texts[-1]
    return None


def tool_results(body: Any) -> list[ToolResult]:
    """Every ``tool_result`` block in the request, oldest first, with its tool name."""
    names: dict[str, str] = {}
    results: list[ToolResult] = []
    for message in _messages(body):
        for block in _blocks(message):
            if block.get("type") == "tool_use":
                names[str(block.get("id"))] = str(block.get("name"))
            elif block.get("type") == "tool_result":
                call_id = str(block.get("tool_use_id"))
                results.append(
                    ToolResult(
                        call_id=call_id,
                        name=names.get(call_id),
                        content=text_of(block.get("content")),
                        is_error=bool(block.get("is_error", False)),
                    )
                )
    return results


def working_dir(body: Any) -> str | None:
    """The cwd Claude announces in its environment block ("Primary working directory")."""
    for message in _messages(body):
        for block in _blocks(message):
            found = _CWD.search(str(block.get("text", "")))
            if found:
                return found.group(1)
    system = body.get("system") if isinstance(body, dict) else None
    found = _CWD.search(text_of(system) if system is not None else "")
    return found.group(1) if found else None
