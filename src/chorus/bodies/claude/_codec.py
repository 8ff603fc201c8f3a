"""Sans-I/O codec for Claude Code's stream-json protocol (AGENT_CLIS.md section 1.4).

:meth:`ClaudeCodec.feed` takes one stdout line and returns canonical events;
the command methods (:meth:`~ClaudeCodec.user_message`,
:meth:`~ClaudeCodec.control_request`, ...) return :class:`StdinLine` objects,
the only thing a Claude body writes to the CLI's stdin (a stray non-JSON line
kills the CLI, so raw strings are never written). No asyncio, no processes.

Choices worth knowing:

- ``system/init`` repeats at every turn in bidirectional mode: it becomes
  :class:`SessionStarted` once per native session id; a repeat whose model or
  permission mode changed becomes ``StatusChanged("config")``, else nothing.
- Protocol bookkeeping (``keep_alive``, stream ``message_start``/``stop``,
  ``input_json_delta``, ...) maps to no event; unrecognised input maps to
  :class:`Unknown`; a line never raises.
- ``result`` costs are per turn: ``model_usage_since_last_result`` when present,
  else the delta of the cumulative ``total_cost_usd``.
"""

from __future__ import annotations

import itertools
import json
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from chorus.bodies._permissions import PermissionAnswer, PermissionAsk
from chorus.bodies._tools import normalize_tool
from chorus.bodies.claude._errors import (
    NO_CONVERSATION,
    result_error,
    retry_error,
    system_api_error,
)
from chorus.events import (
    ControlRequestEvent,
    ControlResponseEvent,
    ErrorCode,
    ErrorInfo,
    Event,
    JsonDict,
    Notice,
    PermissionDecision,
    PermissionRequest,
    RetryNotice,
    SessionStarted,
    StatusChanged,
    Text,
    TextDelta,
    Thinking,
    ToolCall,
    ToolResult,
    TurnCompleted,
    TurnFailed,
    Unknown,
    Usage,
)

BODY_NAME = "claude"
CANCEL_SUBTYPE = "control_cancel_request"
#: A CLI -> host request carrying one MCP message for a server the host answers.
MCP_SUBTYPE = "mcp_message"
_INTERRUPT_MARK = "[Request interrupted by user"
#: Stream events that only frame content the ``assistant`` lines repeat in full.
_SILENT_STREAM = frozenset(
    {"message_start", "message_delta", "message_stop", "content_block_stop", "ping"}
)
_SILENT_DELTAS = frozenset({"input_json_delta", "signature_delta", "citations_delta"})
#: The tags Claude Code wraps a local command's output in (``/model`` when the model
#: changes): notices are plain text.
_COMMAND_TAGS = re.compile(r"</?local-command-std(?:out|err)>|</?command-(?:name|message|args)>")


@dataclass(frozen=True, slots=True)
class StdinLine:
    """One JSON line for Claude's stdin. Only :class:`ClaudeCodec` makes these."""

    text: str


def _dumps(obj: JsonDict) -> StdinLine:
    # ensure_ascii keeps U+2028 and friends escaped, so the CLI's reader cannot split them.
    return StdinLine(json.dumps(obj, ensure_ascii=True, separators=(",", ":")))


class ClaudeCodec:
    """Claude stream-json <-> canonical events. One instance per CLI process.

    ``session_id`` is ``None`` until the CLI confirms one (``system/init`` or a
    ``result`` that is not a failed resume).
    """

    def __init__(self) -> None:
        self.session_id: str | None = None
        self.model: str | None = None
        self.permission_mode: str | None = None
        self.version: str | None = None
        self._started: set[str] = set()
        self._api_error: JsonDict | None = None
        self._last_total_cost: float | None = None
        self._ids = itertools.count(1)
        self._turns = 0
        self._asks: dict[str, JsonDict] = {}
        self._handlers: dict[str, Callable[[JsonDict, str], list[Event]]] = {
            "system": self._system,
            "assistant": self._assistant,
            "user": self._user,
            "stream_event": self._stream_event,
            "result": self._result,
            "control_response": self._control_response,
            "control_request": self._control_request,
            CANCEL_SUBTYPE: self._cancel_request,
            "rate_limit_event": self._rate_limit,
            "tool_progress": self._tool_progress,
            "keep_alive": lambda msg, raw: [],
        }
        self._system_handlers: dict[str, Callable[[JsonDict], list[Event]]] = {
            "init": self._init,
            "status": self._status,
            "api_retry": self._api_retry,
            "api_error": self._system_api_error,
            "session_state_changed": self._state_changed,
            "compact_boundary": self._compacted,
            "informational": self._informational,
            "notification": self._notification,
            "model_fallback": self._model_fallback,
            "permission_denied": self._permission_denied,
            "thinking_tokens": self._thinking_tokens,
        }

    # -- lines in ---------------------------------------------------------------

    def feed(self, line: str) -> list[Event]:
        """Map one stdout line to zero or more events. Never raises."""
        try:
            msg = json.loads(line)
        except ValueError:
            return [Unknown(raw=line)]
        if not isinstance(msg, dict):
            return [Unknown(raw=line)]
        handler = self._handlers.get(str(msg.get("type")))
        if handler is None:
            return [self._unknown(msg, line)]
        try:
            events = handler(msg, line)
        except (KeyError, TypeError, ValueError, AttributeError, ValidationError):
            # A known type in a shape we did not expect: keep the line, do not crash.
            return [self._unknown(msg, line)]
        return [self._tag(e, msg) for e in events]

    def _tag(self, event: Event, msg: JsonDict) -> Event:
        update: JsonDict = {"body": BODY_NAME}
        sid = msg.get("session_id")
        # Control frames carry no session id: use the confirmed one.
        sid = sid if isinstance(sid, str) and sid else self.session_id
        if sid and event.native_session_id is None:
            update["native_session_id"] = sid
        if self._turns and event.turn_id is None:
            update["turn_id"] = str(self._turns)
        return event.model_copy(update=update)

    @staticmethod
    def _unknown(msg: JsonDict, raw: str) -> Unknown:
        native = str(msg.get("type"))
        if isinstance(msg.get("subtype"), str):
            native = f"{native}/{msg['subtype']}"
        return Unknown(raw=raw, native_type=native)

    # -- system ------------------------------------------------------------------

    def _system(self, msg: JsonDict, raw: str) -> list[Event]:
        handler = self._system_handlers.get(str(msg.get("subtype")))
        return handler(msg) if handler else [self._unknown(msg, raw)]

    def _init(self, msg: JsonDict) -> list[Event]:
        sid = str(msg["session_id"])
        self.session_id = sid
        changed = (msg.get("model"), msg.get("permissionMode")) != (
            self.model,
            self.permission_mode,
        )
        self.model = _opt_str(msg.get("model"))
        self.permission_mode = _opt_str(msg.get("permissionMode"))
        self.version = _opt_str(msg.get("claude_code_version")) or self.version
        if sid not in self._started:
            self._started.add(sid)
            return [self._session_started(msg)]
        if changed:
            detail = {"model": self.model, "permission_mode": self.permission_mode}
            return [StatusChanged(state="config", detail=detail)]
        return []

    def _session_started(self, msg: JsonDict) -> SessionStarted:
        tools = msg.get("tools")
        return SessionStarted(
            model=self.model,
            body_version=self.version,
            cwd=_opt_str(msg.get("cwd")),
            tools=[str(t) for t in tools] if isinstance(tools, list) else [],
            permission_mode=self.permission_mode,
        )

    def _status(self, msg: JsonDict) -> list[Event]:
        state = _opt_str(msg.get("status")) or "ready"
        mode = _opt_str(msg.get("permissionMode"))
        if mode:
            self.permission_mode = mode
        return [StatusChanged(state=state, detail={"permission_mode": mode} if mode else None)]

    def _api_retry(self, msg: JsonDict) -> list[Event]:
        return [
            RetryNotice(
                attempt=int(msg["attempt"]),
                max_retries=_opt_int(msg.get("max_retries")),
                delay_ms=_opt_int(msg.get("retry_delay_ms")),
                error=retry_error(msg),
            )
        ]

    def _system_api_error(self, msg: JsonDict) -> list[Event]:
        return [
            RetryNotice(
                attempt=int(msg["retry_attempt"]),
                max_retries=_opt_int(msg.get("max_retries")),
                delay_ms=_opt_int(msg.get("retry_in_ms")),
                error=system_api_error(msg),
            )
        ]

    def _thinking_tokens(self, msg: JsonDict) -> list[Event]:
        """The model is thinking; the CLI's running estimate of thinking tokens."""
        keys = ("estimated_tokens", "estimated_tokens_delta")
        detail = {key: msg[key] for key in keys if isinstance(msg.get(key), int)}
        return [StatusChanged(state="thinking", detail=detail)]

    def _state_changed(self, msg: JsonDict) -> list[Event]:
        return [StatusChanged(state=str(msg["state"]))]

    def _compacted(self, msg: JsonDict) -> list[Event]:
        meta = msg.get("compact_metadata") or {}
        trigger, tokens = meta.get("trigger", "?"), meta.get("pre_tokens", "?")
        text = f"context compacted ({trigger}, {tokens} tokens)"
        return [Notice(message=text, kind="compaction")]

    def _informational(self, msg: JsonDict) -> list[Event]:
        return [Notice(message=str(msg["content"]), kind=str(msg.get("level") or "info"))]

    def _notification(self, msg: JsonDict) -> list[Event]:
        return [Notice(message=str(msg["text"]), kind="notification")]

    def _model_fallback(self, msg: JsonDict) -> list[Event]:
        return [Notice(message=str(msg.get("content") or msg["fallback_model"]), kind="model")]

    def _permission_denied(self, msg: JsonDict) -> list[Event]:
        # Denied by the CLI's own rules or mode, without asking the host (the session
        # adds the policy's rule and reason when the policy denies the call too).
        kind = _opt_str(msg.get("decision_reason_type")) or "unknown"
        reason = f"refused by Claude Code itself ({kind}), without asking Chorus"
        return [
            PermissionDecision(
                request_id=str(msg["tool_use_id"]), decision="deny", reason=reason, source="agent"
            )
        ]

    # -- assistant / user content --------------------------------------------------

    def _assistant(self, msg: JsonDict, raw: str) -> list[Event]:
        message = msg["message"]
        if msg.get("is_api_error_message"):
            # Synthetic line carrying the API failure; the result that follows ends the turn.
            self._api_error = msg
            text = " ".join(str(b.get("text", "")) for b in message.get("content") or [])
            return [Notice(message=text or "API error", kind="api_error")]
        message_id = _opt_str(message.get("id"))
        events: list[Event] = []
        for block in message["content"]:
            events.extend(self._assistant_block(block, message_id, raw))
        return events

    @staticmethod
    def _assistant_block(block: JsonDict, message_id: str | None, raw: str) -> list[Event]:
        kind = block.get("type")
        if kind == "text":
            return [Text(text=str(block["text"]), message_id=message_id)]
        if kind in ("thinking", "redacted_thinking"):
            return [Thinking(text=str(block.get("thinking") or ""), message_id=message_id)]
        if kind in ("tool_use", "server_tool_use", "mcp_tool_use"):
            return [_tool_call(block)]
        return [Unknown(raw=raw, native_type=f"assistant/{kind}")]

    def _user(self, msg: JsonDict, raw: str) -> list[Event]:
        content = msg["message"]["content"]
        if isinstance(content, str):
            return [_user_notice(content)]
        meta = _tool_meta(msg)
        events: list[Event] = []
        for block in content:
            events.extend(self._user_block(block, meta, msg))
        return events

    @staticmethod
    def _user_block(block: JsonDict, meta: dict[str, JsonDict], msg: JsonDict) -> list[Event]:
        kind = block.get("type")
        if kind == "tool_result":
            return [_tool_result(block, meta, msg.get("tool_use_result"))]
        if kind == "text":
            text = str(block["text"])
            if text.startswith(_INTERRUPT_MARK):
                return [Notice(message=text, kind="interrupted")]
            return [_user_notice(text)]
        return []

    def _stream_event(self, msg: JsonDict, raw: str) -> list[Event]:
        event = msg["event"]
        kind = event.get("type")
        message_id = _opt_str(msg.get("api_message_id"))
        if kind in _SILENT_STREAM:
            return []
        if kind == "content_block_start":
            block = event["content_block"]
            text = block.get("text") if block.get("type") == "text" else None
            return [TextDelta(text=text, message_id=message_id)] if text else []
        if kind == "content_block_delta":
            return self._delta(event["delta"], message_id, raw)
        return [Unknown(raw=raw, native_type=f"stream_event/{kind}")]

    def _delta(self, delta: JsonDict, message_id: str | None, raw: str) -> list[Event]:
        kind = delta.get("type")
        if kind == "text_delta":
            return [TextDelta(text=str(delta["text"]), message_id=message_id)]
        if kind == "thinking_delta":
            return [Thinking(text=str(delta["thinking"]), delta=True, message_id=message_id)]
        if kind in _SILENT_DELTAS:
            return []
        return [Unknown(raw=raw, native_type=f"stream_event/{kind}")]

    # -- result ------------------------------------------------------------------

    def _result(self, msg: JsonDict, raw: str) -> list[Event]:
        api_message, self._api_error = self._api_error, None
        cost = self._turn_cost(msg)
        usage = _turn_usage(msg)
        if not msg.get("is_error"):
            self._confirm(msg)
            return [self._completed(msg, usage, cost)]
        error = result_error(msg, api_message)
        if error.code is not ErrorCode.SESSION_NOT_FOUND:
            self._confirm(msg)
        return [
            TurnFailed(
                error=error,
                usage=usage,
                cost_usd=cost,
                terminal_reason=_opt_str(msg.get("terminal_reason")),
            )
        ]

    def _confirm(self, msg: JsonDict) -> None:
        sid = msg.get("session_id")
        if isinstance(sid, str) and sid:
            self.session_id = sid

    @staticmethod
    def _completed(msg: JsonDict, usage: Usage | None, cost: float | None) -> TurnCompleted:
        denials = msg.get("permission_denials")
        return TurnCompleted(
            result=_opt_str(msg.get("result")),
            stop_reason=_opt_str(msg.get("stop_reason")),
            usage=usage,
            cost_usd=cost,
            duration_ms=_opt_int(msg.get("duration_ms")),
            num_turns=_opt_int(msg.get("num_turns")),
            permission_denials=[d for d in denials if isinstance(d, dict)]
            if isinstance(denials, list)
            else [],
        )

    def _turn_cost(self, msg: JsonDict) -> float | None:
        total = msg.get("total_cost_usd")
        split = msg.get("model_usage_since_last_result")
        cost: float | None = None
        if isinstance(split, dict) and split:
            cost = sum(float(m.get("costUSD") or 0.0) for m in split.values())
        elif isinstance(total, int | float):
            cost = max(0.0, float(total) - (self._last_total_cost or 0.0))
        if isinstance(total, int | float):
            self._last_total_cost = float(total)
        return round(cost, 10) if cost is not None else None

    # -- control traffic -------------------------------------------------------------

    def _control_response(self, msg: JsonDict, raw: str) -> list[Event]:
        response = msg["response"]
        request_id = str(response["request_id"])
        if response.get("subtype") == "success":
            payload = response.get("response")
            return [
                ControlResponseEvent(
                    request_id=request_id, ok=True, payload=payload if payload else {}
                )
            ]
        code = response.get("error_code")
        unsupported = code == "unsupported_request"
        error = ErrorInfo(
            code=ErrorCode.UNSUPPORTED if unsupported else ErrorCode.INVALID_REQUEST,
            message=str(response.get("error") or "control request failed"),
            native={"error_code": code} if code else None,
        )
        return [ControlResponseEvent(request_id=request_id, ok=False, error=error)]

    def _control_request(self, msg: JsonDict, raw: str) -> list[Event]:
        request_id = str(msg["request_id"])
        request = msg["request"]
        subtype = str(request["subtype"])
        if subtype != "can_use_tool":
            return [ControlRequestEvent(request_id=request_id, subtype=subtype, payload=request)]
        self._asks[request_id] = request
        native = str(request["tool_name"])
        return [
            PermissionRequest(
                request_id=request_id,
                tool=normalize_tool(native),
                native_tool=native,
                input=dict(request.get("input") or {}),
                call_id=_opt_str(request.get("tool_use_id")),
                description=_opt_str(request.get("description")),
            )
        ]

    def _cancel_request(self, msg: JsonDict, raw: str) -> list[Event]:
        request_id = str(msg["request_id"])
        self._asks.pop(request_id, None)
        return [ControlRequestEvent(request_id=request_id, subtype=CANCEL_SUBTYPE)]

    def _rate_limit(self, msg: JsonDict, raw: str) -> list[Event]:
        return [StatusChanged(state="rate_limit", detail=dict(msg["rate_limit_info"]))]

    def _tool_progress(self, msg: JsonDict, raw: str) -> list[Event]:
        detail = {k: msg.get(k) for k in ("tool_use_id", "tool_name", "elapsed_time_seconds")}
        return [StatusChanged(state="tool_running", detail=detail)]

    # -- commands out ------------------------------------------------------------------

    def user_message(self, text: str) -> StdinLine:
        """A user turn. The CLI answers with ``system/init`` then the turn's lines."""
        self._turns += 1
        message = {"role": "user", "content": text}
        return _dumps(
            {"type": "user", "session_id": "", "message": message, "parent_tool_use_id": None}
        )

    def steer_message(self, text: str) -> StdinLine:
        """A user message for the running turn: the CLI adds it to its next model call
        ("The user sent a new message while you were working"), or runs it as a
        follow-up turn when the current call was the turn's last. Same turn id."""
        message = {"role": "user", "content": text}
        return _dumps(
            {"type": "user", "session_id": "", "message": message, "parent_tool_use_id": None}
        )

    def control_request(self, subtype: str, **fields: Any) -> tuple[str, StdinLine]:
        """A host -> CLI control request and its fresh id (``req_{n}_{8 hex}``)."""
        request_id = f"req_{next(self._ids)}_{secrets.token_hex(4)}"
        request = {"subtype": subtype, **fields}
        line = _dumps({"type": "control_request", "request_id": request_id, "request": request})
        return request_id, line

    def permission_ask(self, request_id: str, *, cwd: str | None = None) -> PermissionAsk | None:
        """The pending ``can_use_tool`` request as a :class:`PermissionAsk` (None if gone)."""
        request = self._asks.get(request_id)
        if request is None:
            return None
        native = str(request["tool_name"])
        blocked = request.get("blocked_path")
        return PermissionAsk(
            body=BODY_NAME,
            tool=normalize_tool(native),
            native_tool=native,
            input=dict(request.get("input") or {}),
            call_id=_opt_str(request.get("tool_use_id")),
            description=_opt_str(request.get("description")),
            cwd=cwd,
            paths=(blocked,) if isinstance(blocked, str) else (),
        )

    def permission_answer(self, request_id: str, answer: PermissionAnswer) -> StdinLine:
        """The reply to ``can_use_tool``: allow with ``updatedInput`` or deny with a message."""
        request = self._asks.pop(request_id, {})
        if answer.decision == "allow":
            updated = answer.updated_input
            body: JsonDict = {
                "behavior": "allow",
                "updatedInput": updated if updated is not None else request.get("input", {}),
            }
        else:
            body = {"behavior": "deny", "message": answer.reason or "denied"}
        return self._success(request_id, body)

    def mcp_answer(self, request_id: str, reply: JsonDict | None) -> StdinLine:
        """The answer to an ``mcp_message`` the CLI sent one of the host's servers: the
        server's JSON-RPC reply (a notification's is an empty result, as the SDK has it)."""
        return self._success(request_id, {"mcp_response": reply or _NOTED})

    def control_error(self, request_id: str, message: str) -> StdinLine:
        """An error answer to a CLI -> host request (unknown subtype, failed handler)."""
        self._asks.pop(request_id, None)
        response = {"subtype": "error", "request_id": request_id, "error": message}
        return _dumps({"type": "control_response", "response": response})

    @staticmethod
    def _success(request_id: str, body: JsonDict) -> StdinLine:
        response = {"subtype": "success", "request_id": request_id, "response": body}
        return _dumps({"type": "control_response", "response": response})

    def is_resume_failure(self, event: Event) -> bool:
        """True for the ``TurnFailed`` of ``--resume <unknown id>`` (the CLI then exits 1)."""
        return (
            isinstance(event, TurnFailed)
            and event.error.code is ErrorCode.SESSION_NOT_FOUND
            and NO_CONVERSATION.search(event.error.message) is not None
        )


# -- helpers ---------------------------------------------------------------------------

#: What the host answers an MCP notification with (the SDKs answer the same).
_NOTED: JsonDict = {"jsonrpc": "2.0", "result": {}, "id": 0}


def _tool_call(block: JsonDict) -> ToolCall:
    native = str(block["name"])
    raw_input = block.get("input")
    tool_input = dict(raw_input) if isinstance(raw_input, dict) else {}
    title = tool_input.get("description")
    return ToolCall(
        call_id=str(block["id"]),
        tool=normalize_tool(native),
        native_tool=native,
        input=tool_input,
        title=title if isinstance(title, str) else None,
    )


def _user_notice(text: str) -> Notice:
    """A user line the CLI wrote itself: a local command's output (``kind="command"``,
    its tags stripped) or a message, as plain text."""
    plain = _COMMAND_TAGS.sub("", text)
    return Notice(message=plain.strip(), kind="command" if plain != text else "user_message")


def _tool_meta(msg: JsonDict) -> dict[str, JsonDict]:
    metas = msg.get("tool_result_meta")
    if not isinstance(metas, list):
        return {}
    return {str(m.get("id")): m for m in metas if isinstance(m, dict)}


def _tool_result(block: JsonDict, meta: dict[str, JsonDict], extra: Any) -> ToolResult:
    call_id = str(block["tool_use_id"])
    is_error = bool(block.get("is_error"))
    return ToolResult(
        call_id=call_id,
        output=_flatten(block.get("content")),
        is_error=is_error,
        status=_result_status(meta.get(call_id, {}), extra, is_error),
    )


def _result_status(meta: JsonDict, extra: Any, is_error: bool) -> str:
    decision = meta.get("permission_decision")
    if isinstance(decision, dict) and decision.get("decision") == "reject":
        return "denied"
    if isinstance(extra, dict) and extra.get("interrupted"):
        return "interrupted"
    return "failed" if is_error else "completed"


def _flatten(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) if isinstance(p, dict) else str(p) for p in content)
    return json.dumps(content)


def _turn_usage(msg: JsonDict) -> Usage | None:
    split = msg.get("model_usage_since_last_result")
    if isinstance(split, dict) and split:
        return _sum_model_usage(split.values())
    usage = msg.get("usage")
    if not isinstance(usage, dict):
        return None
    details = usage.get("output_tokens_details") or {}
    return Usage(
        input_tokens=int(usage.get("input_tokens") or 0),
        output_tokens=int(usage.get("output_tokens") or 0),
        cached_input_tokens=int(usage.get("cache_read_input_tokens") or 0),
        cache_write_input_tokens=int(usage.get("cache_creation_input_tokens") or 0),
        reasoning_tokens=int(details.get("thinking_tokens") or 0),
    )


def _sum_model_usage(values: Any) -> Usage:
    models = [m for m in values if isinstance(m, dict)]

    def total(key: str) -> int:
        return sum(int(m.get(key) or 0) for m in models)

    return Usage(
        input_tokens=total("inputTokens"),
        output_tokens=total("outputTokens"),
        cached_input_tokens=total("cacheReadInputTokens"),
        cache_write_input_tokens=total("cacheCreationInputTokens"),
        reasoning_tokens=total("thinkingTokens"),
    )


def _opt_str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _opt_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
