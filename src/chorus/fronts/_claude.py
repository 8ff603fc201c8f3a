"""The Claude Code front: ``chorus-claude`` speaks Claude Code's stream-json and control
protocol on stdio, so a Claude Agent SDK program (``cli_path``) or Zed's
``claude-code-acp`` (``CLAUDE_CODE_EXECUTABLE``) drives any Chorus body.

Three parts: :func:`parse_argv` (the command line Claude Code accepts, sans-I/O,
in ``_claude_argv``), :class:`ClaudeCodec` (stdin frames -> :class:`Step` s for the
loop, canonical events -> stream-json frames, Claude Code's permission rules, sans-I/O)
and :class:`ClaudeFront` (the thin loop: stdin, the :class:`Link` to the daemon,
stdout, and the program's callbacks: ``can_use_tool`` where Claude Code would ask
it, hooks where Claude Code would run them).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from chorus.events import (
    CanUseToolRequest,
    CompatibilityWarning,
    Event,
    JsonDict,
    Text,
    TextDelta,
    Thinking,
    ToolCall,
    ToolResult,
    TurnCompleted,
    TurnFailed,
    Usage,
)
from chorus.fronts._claude_argv import ClaudeArgs, UsageError, parse_argv
from chorus.fronts._front import CallsShown, StdioFront, run_front, write_line
from chorus.fronts._hooks import HookError, Hooks, Outcome, Permission, callback_frame
from chorus.fronts._link import Link, LinkError, is_turn_end, seconds_left, verdict
from chorus.fronts._mcp import McpReport
from chorus.fronts._rules import ClaudeRules, claude_input, claude_tool
from chorus.gateway import ResponseError

#: The Claude Code release whose protocol this front speaks (the SDK reads it).
CLAUDE_CODE_VERSION = "2.1.330"
INTERRUPTED_TEXT = "[Request interrupted by user]"
#: SDK controls that map one to one onto UCP controls.
UCP_CONTROLS = frozenset({"interrupt", "set_model", "set_permission_mode", "mcp_status"})
# -- the codec ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Step:
    """What the loop must do for a stdin frame.

    ``kind``: ``open`` (initialize the session, then answer), ``control`` (a UCP
    control, then answer), ``user`` (send a turn's text), ``write`` (only the frames).
    """

    kind: str
    frames: tuple[JsonDict, ...] = ()
    request_id: str = ""
    subtype: str = ""
    fields: JsonDict = field(default_factory=dict)


def control_success(request_id: str, response: JsonDict) -> JsonDict:
    body = {"subtype": "success", "request_id": request_id, "response": response}
    return {"type": "control_response", "response": body}


def control_error(request_id: str, message: str) -> JsonDict:
    body = {"subtype": "error", "request_id": request_id, "error": message}
    return {"type": "control_response", "response": body}


def user_text(content: Any) -> str | None:
    """A user message's text (text blocks joined); ``None`` if it has none."""
    if isinstance(content, str):
        return content or None
    if not isinstance(content, list):
        return None
    parts = [b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text"]
    return "\n".join(p for p in parts if p) or None


@dataclass
class _TurnState:
    started: float = field(default_factory=time.monotonic)
    streamed: set[str] = field(default_factory=set)
    open_block: str | None = None
    tools: int = 0
    limit_hit: bool = False


class ClaudeCodec:
    """Stream-json in, steps out; canonical events in, stream-json frames out."""

    def __init__(self, args: ClaudeArgs, cwd: str) -> None:
        self.args = args
        self.cwd = cwd
        self.session_id = ""
        self.body = args.body or ""
        self.model = args.model or "default"
        self.rules = ClaudeRules.of(
            cwd,
            args.permission_mode,
            args.allowed_tools,
            disallowed=args.disallowed_tools,
            dirs=args.add_dirs,
        )
        self.pending = 0
        self._turn: _TurnState | None = None
        self._turn_id: str | None = None
        self._interrupt_wanted = False
        #: Calls denied without the program's callback, for the turn's result.
        self._denials: list[JsonDict] = []
        #: The program's MCP servers (``--mcp-config``), for ``system/init`` and ``mcp_status``.
        self.mcp = McpReport(args.mcp_servers or {})
        #: The program's hooks (``initialize``) and what they need: each call's tool and
        #: input by id (for ``PostToolUse``), the turn's last text (for ``Stop``).
        self.hooks = Hooks()
        self.calls: dict[str, tuple[str, JsonDict]] = {}
        self.last_text = ""
        self._continuing = False

    @property
    def mode(self) -> str:
        return self.rules.mode

    @mode.setter
    def mode(self, value: str) -> None:
        self.rules.mode = value

    # stdin -> steps

    def on_line(self, line: str) -> Step:
        try:
            frame = json.loads(line)
        except json.JSONDecodeError as exc:
            return Step("write", (control_error("", f"malformed line: {exc}"),))
        if not isinstance(frame, dict):
            return Step("write", (control_error("", "malformed line: not a JSON object"),))
        kind = frame.get("type")
        if kind == "user":
            return self._on_user(frame)
        if kind == "control_request":
            return self._on_control(frame)
        if kind == "control_response" and isinstance(frame.get("response"), dict):
            answer = frame["response"]
            return Step("answer", request_id=str(answer.get("request_id", "")), fields=answer)
        return Step("write")  # keep_alive, control_cancel_request, ...

    def _on_user(self, frame: JsonDict) -> Step:
        message = frame.get("message")
        text = user_text(message.get("content") if isinstance(message, dict) else None)
        if text is None:
            return Step("write", (control_error("", "a user message needs text content"),))
        self.pending += 1
        return Step("user", fields={"text": text})

    def _on_control(self, frame: JsonDict) -> Step:
        request_id = str(frame.get("request_id") or "")
        request = frame.get("request")
        subtype = request.get("subtype") if isinstance(request, dict) else None
        if not request_id or not isinstance(request, dict) or not isinstance(subtype, str):
            return Step("write", (control_error(request_id, "malformed control_request"),))
        fields = {k: v for k, v in request.items() if k != "subtype"}
        if subtype == "initialize":
            try:
                self.hooks = Hooks.parse(request.get("hooks"))
            except HookError as exc:
                return Step("write", (control_error(request_id, str(exc)),))
            return Step("open", request_id=request_id, subtype=subtype)
        if subtype in UCP_CONTROLS:
            return Step("control", request_id=request_id, subtype=subtype, fields=fields)
        message = f"unsupported control {subtype!r}: Chorus cannot honour it"
        return Step("write", (control_error(request_id, message),))

    def open_fields(self) -> JsonDict:
        """The UCP ``initialize`` fields from the command line. The front reviews every
        call the policy allows (Claude Code's rules); the policy's own asks come to it
        when the program has a ``can_use_tool`` callback."""
        args = self.args
        body = {
            "system_prompt": args.system_prompt,
            "append_system_prompt": args.append_system_prompt,
            "mcp_servers": args.mcp_servers,
            "can_use_tool": self.takes_asks,
            "review_calls": True,
        }  # for the body this initialize starts
        if args.resume:
            return {"resume": args.resume, **body}
        start = {"body": args.body, "model": args.model, "cwd": self.cwd}
        return {**start, "permission_mode": args.permission_mode, **body}

    def opened(self, request_id: str, info: JsonDict) -> JsonDict:
        """The ``initialize`` answer, once the Chorus session is open."""
        self.session_id = str(info.get("session_id", ""))
        self.model = str(info.get("model") or self.model)
        self.mode = str(info.get("permission_mode") or self.mode)
        body = self.body = str(info.get("body", ""))
        self.mcp.body = body
        model = {"value": self.model, "displayName": self.model, "description": f"{body} body"}
        return control_success(
            request_id,
            {
                "commands": [],
                "agents": [],
                "models": [model],
                "account": {},
                "pid": os.getpid(),
                "claude_code_version": CLAUDE_CODE_VERSION,
                "current_permission_mode": self.mode,
                "chorus": {"session_id": self.session_id, "body": body},
            },
        )

    def answered(self, step: Step, result: JsonDict) -> tuple[JsonDict, ...]:
        """The answer to a UCP control, in Claude Code's shape."""
        if step.subtype == "interrupt":
            return (control_success(step.request_id, {"still_queued": []}),)
        if step.subtype == "set_model":
            self.model = str(result.get("model") or step.fields.get("model") or self.model)
            return (control_success(step.request_id, {"model": self.model}),)
        if step.subtype == "mcp_status":
            return (control_success(step.request_id, self.mcp.answer()),)
        if step.subtype == "set_permission_mode":
            self.mode = str(result.get("mode") or self.mode)
            status = {"type": "system", "subtype": "status", "status": None}
            status |= {"permissionMode": self.mode, "session_id": self.session_id}
            return control_success(step.request_id, {"mode": self.mode}), status
        return (control_success(step.request_id, result),)

    # permission asks: Claude Code's own rules, then the program's can_use_tool

    @property
    def takes_asks(self) -> bool:
        """The program has a ``can_use_tool`` callback (``--permission-prompt-tool
        stdio``); without one, Claude Code denies what it would ask about."""
        return self.args.prompt_tool == "stdio"

    @staticmethod
    def call_of(ask: CanUseToolRequest) -> tuple[str, JsonDict]:
        """The call as Claude Code names it: its tool and its input."""
        tool = claude_tool(ask.tool_name, ask.native_tool)
        return tool, claude_input(tool, ask.input)

    def settled(self, ask: CanUseToolRequest, hook: Permission | None = None) -> JsonDict | None:
        """Claude Code's answer without the program: a review its rules settle (a
        ``PreToolUse`` hook's allow skips their ask, its ask skips their allow), or
        any call it would ask about while the program has no callback (None: ask it)."""
        tool, given = self.call_of(ask)
        if ask.review or hook == "allow":
            base = ask.input.get("cwd")
            rule = self.rules.decide(tool, given, base if isinstance(base, str) else None)
            if rule.decision == "deny":
                return self.denied(ask, rule.reason)
            if hook == "allow" or (rule.decision == "allow" and hook != "ask"):
                return verdict(True)
        if not self.takes_asks:
            message = f"Claude requested permissions to use {tool}, but you haven't granted it yet."
            return self.denied(ask, message)
        return None

    def denied(self, ask: CanUseToolRequest, message: str) -> JsonDict:
        """A deny, listed in the turn result's ``permission_denials``."""
        tool, given = self.call_of(ask)
        self._denials.append(
            {"tool_name": tool, "tool_use_id": ask.call_id or ask.flag_id, "tool_input": given}
        )
        return verdict(False, message)

    def ask_frame(self, request_id: str, ask: CanUseToolRequest) -> JsonDict:
        """A ``can_use_tool`` request to the SDK program (about the call's own id)."""
        tool, given = self.call_of(ask)
        request: JsonDict = {
            "subtype": "can_use_tool",
            "tool_name": tool,
            "input": given,
            "tool_use_id": ask.call_id or ask.flag_id,
            "permission_suggestions": [],
        }
        if isinstance(given.get("description"), str):
            request["description"] = given["description"]
        if not ask.review:  # Chorus's policy asks: say why
            request |= {"description": ask.reason, "decision_reason": ask.reason}
        return {"type": "control_request", "request_id": request_id, "request": request}

    def ask_answer(self, ask: CanUseToolRequest, answer: JsonDict) -> JsonDict:
        """The program's answer to ``can_use_tool`` as Chorus's verdict. An allow that
        changes the input is a deny: a body runs the call it made, not another."""
        if answer.get("subtype") != "success":
            message = str(answer.get("error") or "the SDK program refused to answer")
            return self.denied(ask, message)
        response = answer.get("response")
        body = response if isinstance(response, dict) else {}
        if body.get("behavior") != "allow":
            if body.get("interrupt"):
                self._interrupt_wanted = True
            return self.denied(ask, str(body.get("message") or "denied by the SDK program"))
        changed = body.get("updatedInput")
        if isinstance(changed, dict) and changed != self.call_of(ask)[1]:
            message = (
                "can_use_tool changed the tool's input (updatedInput): Chorus cannot run "
                "a call other than the one the model made, so it was denied"
            )
            return self.denied(ask, message)
        return verdict(True)

    # events -> stdout

    def on_event(self, event: Event) -> list[JsonDict]:
        if isinstance(event, CompatibilityWarning):
            return [self.warning_frame(event)]
        frames: list[JsonDict] = []
        if event.turn_id is not None and event.turn_id != self._turn_id:
            self._turn_id = event.turn_id
            if not (self._continuing and self._turn is not None):
                self._turn = _TurnState()
                frames.append(self.init_frame())
            self._continuing = False
        turn = self._turn
        if turn is None:
            return frames
        frames += self._render(event, turn)
        if isinstance(event, TurnCompleted | TurnFailed) and not is_turn_end(event):
            self._continuing = True  # a follow-up prompt goes on with this turn
        elif isinstance(event, TurnCompleted | TurnFailed):
            frames += self._close_block(turn)
            frames += self._finish(event, turn)
        return frames

    def continue_turn(self) -> None:
        """A ``Stop`` hook blocked the turn's end: the next Chorus turn (its reason as
        the prompt) is the rest of this one for the program (one result, no init), as
        a body's follow-up prompt is."""
        self._continuing = True

    def hook_input(self, event: str, **fields: Any) -> JsonDict:
        """The input every hook callback gets, plus the event's own fields."""
        base: JsonDict = {
            "session_id": self.session_id,
            "transcript_path": "",
            "cwd": self.cwd,
            "permission_mode": self.mode,
            "hook_event_name": event,
        }
        return base | fields

    def blocked_prompt(self, reason: str) -> JsonDict:
        """The result of a prompt a ``UserPromptSubmit`` hook kept from the body."""
        self.pending = max(0, self.pending - 1)
        message = f"a UserPromptSubmit hook blocked the prompt: {reason or 'no reason given'}"
        return self.fatal(message) | {"uuid": str(uuid.uuid4())}

    def warning_frame(self, warning: CompatibilityWarning) -> JsonDict:
        """What Chorus could not honour (an SDK program sees a ``SystemMessage``)."""
        frame = {"type": "system", "subtype": "chorus_warning", "control": warning.control}
        frame |= {"message": warning.message, "session_id": self.session_id}
        return frame | {"uuid": str(uuid.uuid4())}

    def init_frame(self) -> JsonDict:
        return {
            "type": "system",
            "subtype": "init",
            "cwd": self.cwd,
            "session_id": self.session_id,
            "tools": [],
            "mcp_servers": self.mcp.init_entries(),
            "model": self.model,
            "permissionMode": self.mode,
            "slash_commands": [],
            "apiKeySource": "none",
            "claude_code_version": CLAUDE_CODE_VERSION,
            "output_style": "default",
            "agents": [],
            "skills": [],
            "plugins": [],
            "uuid": str(uuid.uuid4()),
        }

    def _render(self, event: Event, turn: _TurnState) -> list[JsonDict]:
        match event:
            case TextDelta():
                return self._delta(event, turn)
            case Text() if event.text:
                self.last_text = event.text
                block: JsonDict = {"type": "text", "text": event.text}
                return [*self._close_block(turn), self._assistant([block])]
            case Thinking() if not event.delta and event.text:
                block = {"type": "thinking", "thinking": event.text, "signature": ""}
                return [*self._close_block(turn), self._assistant([block])]
            case ToolCall():
                turn.tools += 1
                self._check_limit(turn)
                tool = claude_tool(event.tool, event.native_tool)
                self.calls[event.call_id] = (tool, claude_input(tool, event.input))
                block = {
                    "type": "tool_use",
                    "id": event.call_id,
                    "name": event.native_tool,
                    "input": event.input,
                }
                return [*self._close_block(turn), self._assistant([block])]
            case ToolResult():
                result = {
                    "type": "tool_result",
                    "tool_use_id": event.call_id,
                    "content": event.output,
                    "is_error": event.is_error,
                }
                return [self._user([result])]
        return []

    def _delta(self, event: TextDelta, turn: _TurnState) -> list[JsonDict]:
        if not self.args.partials:
            return []
        frames: list[JsonDict] = []
        key = event.message_id or "text"
        if turn.open_block != key:
            frames += self._close_block(turn)
            message: JsonDict = {"id": key, "type": "message", "role": "assistant"}
            message["model"] = self.model
            message |= {"content": [], "stop_reason": None, "usage": {}}
            frames.append(self._stream({"type": "message_start", "message": message}))
            start = {"type": "content_block_start", "index": 0}
            frames.append(self._stream(start | {"content_block": {"type": "text", "text": ""}}))
            turn.open_block = key
        delta = {"type": "content_block_delta", "index": 0}
        frames.append(self._stream(delta | {"delta": {"type": "text_delta", "text": event.text}}))
        return frames

    def _close_block(self, turn: _TurnState) -> list[JsonDict]:
        if turn.open_block is None:
            return []
        turn.open_block = None
        stop_reason = {"type": "message_delta", "delta": {"stop_reason": None}, "usage": {}}
        return [
            self._stream({"type": "content_block_stop", "index": 0}),
            self._stream(stop_reason),
            self._stream({"type": "message_stop"}),
        ]

    def _check_limit(self, turn: _TurnState) -> None:
        """``--max-turns``: a tool call that needs one model request too many stops the
        turn (the loop interrupts it when :meth:`take_interrupt` says so)."""
        limit = self.args.max_turns
        if limit is not None and turn.tools >= limit and not turn.limit_hit:
            turn.limit_hit = True
            self._interrupt_wanted = True

    def take_interrupt(self) -> bool:
        wanted, self._interrupt_wanted = self._interrupt_wanted, False
        return wanted

    def _finish(self, end: TurnCompleted | TurnFailed, turn: _TurnState) -> list[JsonDict]:
        self.pending = max(0, self.pending - 1)
        self._turn = None
        denials, self._denials = self._denials, []
        frames: list[JsonDict] = []
        result: JsonDict = {
            "type": "result",
            "duration_ms": int((time.monotonic() - turn.started) * 1000),
            "duration_api_ms": 0,
            "num_turns": turn.tools + 1,
            "session_id": self.session_id,
            "total_cost_usd": end.cost_usd or 0.0,
            "usage": usage_json(end.usage),
            "permission_denials": denials,
            "uuid": str(uuid.uuid4()),
        }
        if isinstance(end, TurnCompleted):
            result |= {"subtype": "success", "is_error": False, "result": end.result or ""}
            result |= {"stop_reason": end.stop_reason, "terminal_reason": "completed"}
            result["duration_ms"] = end.duration_ms or result["duration_ms"]
            result["permission_denials"] = merged_denials(end.permission_denials, denials)
        elif turn.limit_hit:
            message = f"Reached maximum number of turns ({self.args.max_turns})"
            result |= {"subtype": "error_max_turns", "is_error": True, "errors": [message]}
            result |= {"stop_reason": None, "terminal_reason": "max_turns"}
        else:
            interrupted = end.error.code == "interrupted"
            if interrupted:
                frames.append(self._user([{"type": "text", "text": INTERRUPTED_TEXT}]))
            result |= {"subtype": "error_during_execution", "is_error": True}
            result |= {"errors": [end.error.message], "stop_reason": None}
            result["terminal_reason"] = "aborted_streaming" if interrupted else "error"
        return [*frames, result]

    def _assistant(self, content: list[JsonDict]) -> JsonDict:
        message: JsonDict = {"id": f"msg_{uuid.uuid4().hex[:24]}", "type": "message"}
        message["role"] = "assistant"
        message |= {"model": self.model, "content": content, "stop_reason": None}
        return self._envelope({"type": "assistant", "message": message})

    def _user(self, content: list[JsonDict]) -> JsonDict:
        return self._envelope({"type": "user", "message": {"role": "user", "content": content}})

    def _stream(self, event: JsonDict) -> JsonDict:
        return self._envelope({"type": "stream_event", "event": event})

    def _envelope(self, frame: JsonDict) -> JsonDict:
        frame |= {"parent_tool_use_id": None, "session_id": self.session_id}
        frame["uuid"] = str(uuid.uuid4())
        return frame

    def fatal(self, message: str) -> JsonDict:
        return {
            "type": "result",
            "subtype": "error_during_execution",
            "is_error": True,
            "duration_ms": 0,
            "duration_api_ms": 0,
            "num_turns": 0,
            "session_id": self.session_id,
            "errors": [message],
        }


def merged_denials(body: list[JsonDict], front: list[JsonDict]) -> list[JsonDict]:
    """The body's own ``permission_denials`` (a Claude body reports them) and the
    front's, each call once."""
    seen = {d.get("tool_use_id") for d in body}
    return [*body, *(d for d in front if d.get("tool_use_id") not in seen)]


def usage_json(usage: Usage | None) -> JsonDict:
    if usage is None:
        return {"input_tokens": 0, "output_tokens": 0}
    return {
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "cache_read_input_tokens": usage.cached_input_tokens,
        "cache_creation_input_tokens": usage.cache_write_input_tokens,
    }


# -- the loop -----------------------------------------------------------------------------


class ClaudeFront(StdioFront):
    """Claude Code's stdio protocol over a Chorus session."""

    name = "claude"

    def __init__(self, args: ClaudeArgs, cwd: str | None = None) -> None:
        super().__init__()
        self.codec = ClaudeCodec(args, cwd or os.getcwd())
        self._link: Link | None = None
        self._idle = asyncio.Event()
        self._idle.set()
        #: One prompt at a time, in order (a ``UserPromptSubmit`` hook runs first).
        self._prompting = asyncio.Lock()
        #: What hooks said when no turn ran to hear it: added to the next prompt.
        self._untold: list[str] = []
        self._stop_active = False
        #: Calls put to the front before they ran (the others ran unasked).
        self._reviewed: set[str] = set()
        self._shown = CallsShown()

    def fatal_frame(self, message: str) -> JsonDict | None:
        return self.codec.fatal(message)

    async def _ask(self, ask: CanUseToolRequest) -> JsonDict:
        """A call Chorus's policy allowed (a review) or asks about: the program's
        ``PreToolUse`` hooks, Claude Code's rules, then the program's ``can_use_tool``
        callback where Claude Code asks it."""
        if ask.call_id is not None:
            self._reviewed.add(ask.call_id)
        await self._shown.after(ask.call_id)  # the tool_use first, as Claude Code does
        final, hook = await self._pre_tool_use(ask)
        settled = final or self.codec.settled(ask, hook)
        if settled is not None:
            return settled
        request_id = f"chorus_req_{uuid.uuid4().hex[:12]}"
        frame = self.codec.ask_frame(request_id, ask)
        answer = await self.ask_client(request_id, frame, seconds_left(ask))
        if answer is None:
            write_line({"type": "control_cancel_request", "request_id": request_id})
            message = "the SDK program did not answer in time"
            return verdict(True) if ask.default == "allow" else self.codec.denied(ask, message)
        said = self.codec.ask_answer(ask, answer)
        if self.codec.take_interrupt():
            self._interrupt()
        return said

    # hooks

    async def _pre_tool_use(
        self, ask: CanUseToolRequest
    ) -> tuple[JsonDict | None, Permission | None]:
        """The ``PreToolUse`` hooks' deny (a final verdict) or their permission."""
        if not self.codec.hooks.has("PreToolUse"):
            return None, None
        tool, given = self.codec.call_of(ask)
        fields = {"tool_name": tool, "tool_input": given, "tool_use_id": ask.call_id or ask.flag_id}
        out = await self._run_hooks("PreToolUse", tool, fields)
        if out.context:
            self.spawn(self._tell("\n".join(out.context)))
        if out.stopped:
            self._interrupt()
            return self.codec.denied(ask, out.reason or "a PreToolUse hook stopped the turn"), None
        if out.permission == "deny":
            return self.codec.denied(ask, out.reason or "denied by a PreToolUse hook"), None
        if out.changed_input:
            message = "a PreToolUse hook changed the tool's input (updatedInput): denied"
            return self.codec.denied(ask, message), None
        return None, out.permission

    async def _run_hooks(self, event: str, tool: str | None, fields: JsonDict) -> Outcome:
        """Every callback of ``event`` (on ``tool``), at once; what they said together."""
        given = self.codec.hook_input(event, **fields)
        calls = self.codec.hooks.callbacks(event, tool)
        answers = await asyncio.gather(*(self._callback(cid, t, given) for cid, t in calls))
        outcome = Outcome()
        for answer in answers:
            outcome.add(answer, event)
        return outcome

    async def _callback(self, callback_id: str, timeout_s: float, given: JsonDict) -> Any:
        """One ``hook_callback``; None when it failed or gave no answer in time."""
        request_id = f"chorus_hook_{uuid.uuid4().hex[:12]}"
        frame = callback_frame(request_id, callback_id, given)
        answer = await self.ask_client(request_id, frame, timeout_s)
        if answer is None:
            write_line({"type": "control_cancel_request", "request_id": request_id})
            return None
        return answer.get("response") if answer.get("subtype") == "success" else None

    def _post_tool_use(self, result: ToolResult) -> None:
        """``PostToolUse`` (``PostToolUseFailure`` for an error) on a tool result; first
        ``PreToolUse`` for a call the body's CLI ran without asking Chorus."""
        event = "PostToolUseFailure" if result.is_error else "PostToolUse"
        unasked = result.call_id not in self._reviewed and self.codec.hooks.has("PreToolUse")
        self._reviewed.discard(result.call_id)
        if not (unasked or self.codec.hooks.has(event)):
            return
        tool, given = self.codec.calls.get(result.call_id, ("", {}))
        fields: JsonDict = {"tool_name": tool, "tool_input": given, "tool_use_id": result.call_id}
        self.spawn(self._after_tool(event, result, fields, unasked))

    async def _after_tool(
        self, event: str, result: ToolResult, fields: JsonDict, unasked: bool
    ) -> None:
        tool = str(fields["tool_name"])
        if unasked:
            await self._late_pre_tool_use(tool, fields)
        if not self.codec.hooks.has(event):
            return
        fields = fields | {("error" if result.is_error else "tool_response"): result.output}
        out = await self._run_hooks(event, tool, fields)
        if out.stopped:
            self._interrupt()
        said = [out.reason] if out.blocked and out.reason else []
        said += out.context
        if said:
            await self._tell(f"[{event} hook] " + "\n".join(said))

    async def _late_pre_tool_use(self, tool: str, fields: JsonDict) -> None:
        """``PreToolUse`` for a call the body's CLI ran without asking Chorus (one its
        own rules let through, e.g. a read-only command in the working folder): the
        hooks still see it; a deny they give is said aloud, since the call has run."""
        out = await self._run_hooks("PreToolUse", tool, fields)
        if out.permission == "deny" or out.stopped:
            message = (
                f"a PreToolUse hook denied {tool} ({fields['tool_use_id']}), but the "
                f"{self.codec.body} body's CLI had run it without asking Chorus"
            )
            write_line(
                self.codec.warning_frame(CompatibilityWarning(control="hooks", message=message))
            )

    async def _stop_blocked(self, link: Link, event: Event) -> bool:
        """At a turn's end, the ``Stop`` hooks: a block sends its reason as the next
        prompt, in the same turn for the program (True: the end is not shown)."""
        if not (isinstance(event, TurnCompleted) and is_turn_end(event)):
            return False
        if not self.codec.hooks.has("Stop"):
            return False
        fields = {
            "stop_hook_active": self._stop_active,
            "last_assistant_message": self.codec.last_text,
        }
        out = await self._run_hooks("Stop", None, fields)
        self._stop_active = out.blocked and not out.stopped
        if not self._stop_active:
            return False
        self.codec.continue_turn()
        untold, self._untold = self._untold, []
        await link.user("\n\n".join([out.reason or "Continue.", *untold]))
        return True

    async def _tell(self, text: str) -> None:
        """Hand the model what a hook said: steered into the running turn where the
        body steers natively, else with the next prompt."""
        link = self._link
        capabilities = link.info.get("capabilities") if link is not None else None
        if link is None or not isinstance(capabilities, dict):
            self._untold.append(text)
            return
        if capabilities.get("steer") != "native":
            self._untold.append(text)
            return
        try:
            await link.control("steer", text=text)
        except ResponseError:  # the turn is over
            self._untold.append(text)

    def _interrupt(self) -> None:
        if self._link is not None:
            self.spawn(self._stop_turn(self._link))

    async def on_line(self, line: str) -> None:
        await self._handle(self.codec.on_line(line))

    async def drained(self) -> None:
        await self._idle.wait()  # end of input: finish the queued turns

    async def _handle(self, step: Step) -> None:
        for frame in step.frames:
            write_line(frame)
        if step.kind == "open":
            await self._open(step.request_id)
        elif step.kind == "control":
            self.spawn(self._control(step))
        elif step.kind == "user":
            if self._link is None and await self._session("") is None:
                self.codec.pending -= 1
                return
            self._idle.clear()
            self.spawn(self._user(str(step.fields["text"])))
        elif step.kind == "answer":
            self.answered(step.request_id, step.fields)

    async def _session(self, request_id: str) -> Link | None:
        """The link, its session opened (at the first initialize or user frame)."""
        if self._link is not None:
            return self._link
        try:
            link = await self.stack.enter_async_context(Link.connect(self._ask))
            info = await link.open(**self.codec.open_fields())
        except LinkError as exc:
            write_line(control_error(request_id, str(exc)))
            raise
        except ResponseError as exc:
            write_line(control_error(request_id, exc.message))
            return None
        self._link = link
        await self._mcp_status(link)
        write_line(self.codec.opened(request_id, info))
        self.spawn(self._pump(link))
        return link

    async def _open(self, request_id: str) -> None:
        if self._link is not None:
            write_line(self.codec.opened(request_id, self._link.info))
            return
        await self._session(request_id)

    async def _user(self, text: str) -> None:
        """Send one prompt (after the ones before it), as the hooks leave it."""
        async with self._prompting:
            prompt = await self._submitted(text)
            if prompt is None:
                self._settle()
            elif self._link is not None:
                await self._link.user(prompt)

    async def _submitted(self, text: str) -> str | None:
        """The prompt after the ``UserPromptSubmit`` hooks (None: they blocked it),
        with what hooks said while no turn ran."""
        untold, self._untold = self._untold, []
        if self.codec.hooks.has("UserPromptSubmit"):
            out = await self._run_hooks("UserPromptSubmit", None, {"prompt": text})
            if out.blocked or out.stopped:
                write_line(self.codec.blocked_prompt(out.reason))
                return None
            untold += out.context
        return "\n\n".join([text, *untold])

    def _settle(self) -> None:
        if self.codec.pending == 0:
            self._idle.set()

    async def _mcp_status(self, link: Link) -> None:
        """The body's own report of its MCP servers, where its CLI gives one."""
        capabilities = link.info.get("capabilities")
        if not isinstance(capabilities, dict) or capabilities.get("mcp_status") in {
            None,
            "unsupported",
        }:
            return  # the front reports what it handed over
        try:
            answer = await link.control("mcp_status")
        except ResponseError:
            return  # the body cannot say: the front reports what it handed over
        servers = answer.get("mcpServers")
        self.codec.mcp.native = servers if isinstance(servers, list) else None

    async def _control(self, step: Step) -> None:
        if self._link is None:
            write_line(control_error(step.request_id, "initialize first"))
            return
        if step.subtype == "mcp_status":
            await self._mcp_status(self._link)
            for frame in self.codec.answered(step, {}):
                write_line(frame)
            return
        try:
            result = await self._link.control(step.subtype, **step.fields)
        except ResponseError as exc:
            write_line(control_error(step.request_id, exc.message))
            return
        for frame in self.codec.answered(step, result):
            write_line(frame)

    @staticmethod
    async def _stop_turn(link: Link) -> None:
        with contextlib.suppress(ResponseError):  # the turn may have ended meanwhile
            await link.control("interrupt")

    async def _pump(self, link: Link) -> None:
        async for event in link.events():
            if await self._stop_blocked(link, event):
                continue
            for frame in self.codec.on_event(event):
                write_line(frame)
            if isinstance(event, ToolCall):
                self._shown.shown(event.call_id)
            if isinstance(event, ToolResult):
                self._post_tool_use(event)
            if self.codec.take_interrupt():
                self.spawn(self._stop_turn(link))
            self._settle()


def main(argv: Sequence[str] | None = None) -> None:
    """``chorus-claude``: Claude Code's command line, Chorus underneath."""
    try:
        args = parse_argv(sys.argv[1:] if argv is None else argv, dict(os.environ))
    except UsageError as exc:
        print(f"chorus-claude: {exc}", file=sys.stderr)
        sys.exit(2)
    if args.version:
        print(f"{CLAUDE_CODE_VERSION} (Claude Code; Chorus front)")
        sys.exit(0)
    sys.exit(run_front(ClaudeFront(args)))
