"""The Codex app-server front: ``chorus codex-app-server`` / ``chorus-codex app-server
--listen stdio://`` speak the app-server JSON-RPC that the ``openai-codex`` SDK
(``Codex``, ``CodexClient``) drives, with any Chorus body underneath.

:func:`parse_codex_argv` and :class:`CodexCodec` are sans-I/O (lines in, steps and
frames out; canonical events in, ``item/*`` and ``turn/*`` notifications out);
:class:`CodexFront` is the thin loop over stdio and one :class:`Link` per thread.
"""

from __future__ import annotations

import json
import os
import sys
import time
import uuid
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chorus.events import (
    CanUseToolRequest,
    CompatibilityWarning,
    Event,
    JsonDict,
    Text,
    TextDelta,
    ToolCall,
    ToolResult,
    TurnCompleted,
    TurnFailed,
    Usage,
)
from chorus.fronts._front import CallsShown, StdioFront, run_front, write_line
from chorus.fronts._link import Link, LinkError, is_turn_end, seconds_left, verdict
from chorus.fronts._mcp import McpReport
from chorus.fronts._rules import CodexRules, Roots, unwrap_shell
from chorus.gateway import ResponseError

#: The app-server release whose protocol this front speaks (the SDK wants >= 0.151.0).
CODEX_VERSION = "0.169.0"
USER_AGENT = f"chorus/{CODEX_VERSION}"
BODY_ENV = "CHORUS_BODY"
BODY_CONFIG = "chorus_body"
PARSE_ERROR, METHOD_NOT_FOUND, INVALID_PARAMS, INTERNAL_ERROR = -32700, -32601, -32602, -32603
#: Codex sandbox mode -> (Chorus permission mode, the sandbox policy echoed back).
SANDBOXES: dict[str, tuple[str, str]] = {
    "read-only": ("default", "readOnly"),
    "workspace-write": ("acceptEdits", "workspaceWrite"),
    "danger-full-access": ("bypassPermissions", "dangerFullAccess"),
}


#: Client decisions on an approval request that allow the call.
ACCEPTING = frozenset({"accept", "acceptForSession", "approved", "approved_for_session"})
EDIT_TOOLS = frozenset({"write", "edit"})


class UsageError(Exception):
    """A command line ``chorus-codex`` cannot run with (exit 2)."""


@dataclass(frozen=True)
class CodexArgs:
    body: str | None = None
    version: bool = False


def parse_codex_argv(argv: Sequence[str], env: dict[str, str]) -> CodexArgs:
    """``[--config k=v]... app-server [--listen stdio://]`` (or ``--version``)."""
    args, config, command = list(argv), {}, None
    while args:
        arg = args.pop(0)
        if arg in {"-V", "--version"}:
            return CodexArgs(version=True)
        if arg in {"-c", "--config"}:
            key, eq, value = (args.pop(0) if args else "").partition("=")
            if not eq:
                raise UsageError(f"{arg} needs key=value")
            config[key.strip()] = value.strip().strip('"')
        elif arg == "--listen":
            listen = args.pop(0) if args else ""
            if listen != "stdio://":
                raise UsageError(f"--listen {listen!r}: only stdio:// is served")
        elif arg == "app-server" and command is None:
            command = arg
        elif not arg.startswith("-"):
            raise UsageError(f"{arg!r}: chorus-codex serves only `app-server`")
    if command is None:
        raise UsageError("usage: chorus-codex [--config k=v]... app-server --listen stdio://")
    return CodexArgs(body=config.get(BODY_CONFIG) or env.get(BODY_ENV) or None)


# -- the codec ----------------------------------------------------------------------------


def response(request_id: Any, result: JsonDict) -> JsonDict:
    return {"id": request_id, "result": result}


def failure(request_id: Any, code: int, message: str) -> JsonDict:
    return {"id": request_id, "error": {"code": code, "message": message}}


def notification(method: str, params: JsonDict) -> JsonDict:
    return {"method": method, "params": params}


@dataclass(frozen=True)
class Step:
    """What the loop must do for a line: ``write`` the frames, ``open`` a thread,
    ``turn`` (send text), or a UCP ``control``."""

    kind: str
    frames: tuple[JsonDict, ...] = ()
    request_id: Any = None
    thread_id: str = ""
    fields: JsonDict = field(default_factory=dict)


def input_text(items: Any) -> str | None:
    if not isinstance(items, list):
        return None
    texts = [i.get("text", "") for i in items if isinstance(i, dict) and i.get("type") == "text"]
    return "\n".join(t for t in texts if t) or None


@dataclass
class _Turn:
    id: str
    started: float = field(default_factory=time.time)
    items: list[JsonDict] = field(default_factory=list)
    open_message: str | None = None
    chorus_turn: str | None = None
    #: The body ended a prompt its turn goes on after (``continues``): the next
    #: prompt's events, whatever their turn id, are this turn's.
    continuing: bool = False


#: ``sandboxPolicy.type`` (a turn's override) -> the sandbox mode.
SANDBOX_TYPES = {v[1]: k for k, v in SANDBOXES.items()}


def rules_of(params: JsonDict, cwd: str) -> CodexRules:
    """Where ``codex app-server`` would ask this thread's client (``thread/start``'s
    ``approvalPolicy``, ``approvalsReviewer`` and ``sandbox``)."""
    approval = params.get("approvalPolicy")
    return CodexRules(
        Roots(cwd),
        approval=approval if isinstance(approval, str) else "on-request",
        sandbox=str(params.get("sandbox") or "read-only"),
        reviewer=str(params.get("approvalsReviewer") or "user"),
    )


class CodexThread:
    """One thread (a Chorus session): front turn ids and the events -> notifications."""

    def __init__(
        self,
        thread_id: str,
        cwd: str,
        rules: CodexRules | None = None,
        mcp: McpReport | None = None,
    ) -> None:
        self.id = thread_id
        self.cwd = cwd
        self.rules = rules or CodexRules(Roots(cwd))
        #: The client's MCP servers (``config.mcp_servers``), for ``mcpServerStatus/list``.
        self.mcp = mcp or McpReport()
        self.waiting: deque[_Turn] = deque()
        self.current: _Turn | None = None
        self.calls: dict[str, JsonDict] = {}

    def new_turn(self) -> _Turn:
        turn = _Turn(id=str(uuid.uuid4()))
        self.waiting.append(turn)
        return turn

    @property
    def active(self) -> _Turn | None:
        return self.current or (self.waiting[0] if self.waiting else None)

    def on_event(self, event: Event) -> list[JsonDict]:
        if isinstance(event, CompatibilityWarning):  # what Chorus could not honour
            return [notification("configWarning", {"summary": event.message, "details": None})]
        turn = self._turn_of(event)
        if turn is None:
            return []
        frames = self._render(event, turn)
        if isinstance(event, TurnCompleted | TurnFailed) and not is_turn_end(event):
            turn.continuing = True
        elif isinstance(event, TurnCompleted | TurnFailed):
            frames += self._finish(event, turn)
        return frames

    def _turn_of(self, event: Event) -> _Turn | None:
        if event.turn_id is None:
            return None
        if self.current is not None and self.current.chorus_turn == event.turn_id:
            return self.current
        if self.current is not None and self.current.continuing:
            self.current.chorus_turn, self.current.continuing = event.turn_id, False
            return self.current
        if not self.waiting:
            return None  # a turn nobody here started (another client's)
        self.current = self.waiting.popleft()
        self.current.chorus_turn = event.turn_id
        return self.current

    def _note(self, method: str, turn: _Turn, **params: Any) -> JsonDict:
        return notification(method, {"threadId": self.id, "turnId": turn.id, **params})

    def _render(self, event: Event, turn: _Turn) -> list[JsonDict]:
        match event:
            case TextDelta():
                return self._delta(event, turn)
            case Text() if event.text:
                return self._message(event, turn)
            case ToolCall():
                item = self._tool_item(event)
                self.calls[event.call_id] = item
                return [self._note("item/started", turn, item=item, startedAtMs=_now_ms())]
            case ToolResult() if event.call_id in self.calls:
                item = _tool_done(self.calls.pop(event.call_id), event)
                turn.items.append(item)
                return [self._note("item/completed", turn, item=item, completedAtMs=_now_ms())]
        return []

    def _delta(self, event: TextDelta, turn: _Turn) -> list[JsonDict]:
        item_id = event.message_id or f"msg-{turn.id}"
        frames: list[JsonDict] = []
        if turn.open_message != item_id:
            turn.open_message = item_id
            item = {"type": "agentMessage", "id": item_id, "text": ""}
            frames.append(self._note("item/started", turn, item=item, startedAtMs=_now_ms()))
        frames.append(self._note("item/agentMessage/delta", turn, itemId=item_id, delta=event.text))
        return frames

    def _message(self, event: Text, turn: _Turn) -> list[JsonDict]:
        item = {"type": "agentMessage", "id": event.message_id or f"msg-{turn.id}"}
        item["text"] = event.text
        turn.open_message = None
        turn.items.append(item)
        return [self._note("item/completed", turn, item=item, completedAtMs=_now_ms())]

    def _tool_item(self, event: ToolCall) -> JsonDict:
        if event.tool == "shell":
            command = event.input.get("command") or event.input.get("cmd") or ""
            if isinstance(command, list):
                command = " ".join(str(part) for part in command)
            return {
                "type": "commandExecution",
                "id": event.call_id,
                "command": str(command),
                "cwd": self.cwd,
                "commandActions": [],
                "status": "inProgress",
            }
        return {
            "type": "dynamicToolCall",
            "id": event.call_id,
            "tool": event.native_tool,
            "arguments": event.input,
            "status": "inProgress",
        }

    def _finish(self, end: TurnCompleted | TurnFailed, turn: _Turn) -> list[JsonDict]:
        self.current = None
        frames: list[JsonDict] = []
        if end.usage is not None:
            usage = token_usage(end.usage)
            frames.append(self._note("thread/tokenUsage/updated", turn, tokenUsage=usage))
        frames.append(
            notification("turn/completed", {"threadId": self.id, "turn": turn_json(turn, end)})
        )
        return frames


def _now_ms() -> int:
    return int(time.time() * 1000)


def _tool_done(item: JsonDict, result: ToolResult) -> JsonDict:
    done = dict(item)
    done["status"] = "failed" if result.is_error else "completed"
    if item["type"] == "commandExecution":
        done |= {"aggregatedOutput": result.output, "exitCode": result.exit_code}
    else:
        done |= {"success": not result.is_error}
        done["contentItems"] = [{"type": "inputText", "text": result.output}]
    return done


def turn_json(turn: _Turn, end: TurnCompleted | TurnFailed | None = None) -> JsonDict:
    status, error = "inProgress", None
    if isinstance(end, TurnCompleted):
        status = "completed"
    elif isinstance(end, TurnFailed):
        interrupted = end.error.code == "interrupted"
        status = "interrupted" if interrupted else "failed"
        error = None if interrupted else {"message": end.error.message}
    completed = int(time.time()) if end is not None else None
    return {
        "id": turn.id,
        "items": turn.items if end is not None else [],
        "status": status,
        "error": error,
        "startedAt": int(turn.started),
        "completedAt": completed,
        "durationMs": int((time.time() - turn.started) * 1000) if end is not None else None,
    }


def token_usage(usage: Usage) -> JsonDict:
    breakdown = {
        "totalTokens": usage.input_tokens + usage.output_tokens,
        "inputTokens": usage.input_tokens,
        "cachedInputTokens": usage.cached_input_tokens,
        "cacheWriteInputTokens": usage.cache_write_input_tokens,
        "outputTokens": usage.output_tokens,
        "reasoningOutputTokens": usage.reasoning_tokens,
    }
    return {"total": breakdown, "last": breakdown}


def instructions(params: JsonDict) -> JsonDict:
    """``thread/start``'s instructions and MCP servers as UCP ``initialize`` takes
    them: ``baseInstructions`` (or ``config.base_instructions``) replaces the body's
    system prompt where it can, ``developerInstructions`` (or the config's) is
    added to it, ``config.mcp_servers`` (Codex's own table) are the body's."""
    config = params.get("config")
    config = config if isinstance(config, dict) else {}
    servers = config.get("mcp_servers")
    return {
        "system_prompt": params.get("baseInstructions") or config.get("base_instructions"),
        "append_system_prompt": params.get("developerInstructions")
        or config.get("developer_instructions"),
        "mcp_servers": servers if isinstance(servers, dict) else None,
    }


class CodexCodec:
    """App-server JSON-RPC lines in, steps out; thread and turn answers out."""

    def __init__(self, args: CodexArgs, cwd: str) -> None:
        self.args = args
        self.cwd = cwd
        self.threads: dict[str, CodexThread] = {}

    def on_line(self, line: str) -> Step:
        try:
            frame = json.loads(line)
        except json.JSONDecodeError as exc:
            return Step("write", (failure(None, PARSE_ERROR, f"malformed line: {exc}"),))
        if not isinstance(frame, dict):
            return Step("write", (failure(None, PARSE_ERROR, "not a JSON object"),))
        method, request_id = frame.get("method"), frame.get("id")
        if not isinstance(method, str):
            return Step("answer", request_id=request_id, fields=frame)  # a reply to us
        if request_id is None:
            return Step("write")  # a notification (initialized, ...)
        params = frame.get("params")
        return self._request(method, request_id, params if isinstance(params, dict) else {})

    def _request(self, method: str, request_id: Any, params: JsonDict) -> Step:
        if method == "initialize":
            info = {"userAgent": USER_AGENT, "platformFamily": "unix", "platformOs": sys.platform}
            return Step("write", (response(request_id, info),))
        if method in {"thread/start", "thread/resume"}:
            return Step("open", request_id=request_id, fields={"method": method, **params})
        if method == "mcpServerStatus/list":
            return Step("write", (response(request_id, self.mcp_status(params)),))
        thread_id = str(params.get("threadId", ""))
        if (
            method in {"turn/start", "turn/steer", "turn/interrupt"}
            and thread_id not in self.threads
        ):
            return Step("write", (failure(request_id, INVALID_PARAMS, f"no thread {thread_id!r}"),))
        if method in {"turn/start", "turn/steer"}:
            text = input_text(params.get("input"))
            if text is None:
                return Step("write", (failure(request_id, INVALID_PARAMS, "input has no text"),))
            return Step(method, request_id=request_id, thread_id=thread_id, fields={"text": text})
        if method == "turn/interrupt":
            return Step("turn/interrupt", request_id=request_id, thread_id=thread_id)
        return Step(
            "write", (failure(request_id, METHOD_NOT_FOUND, f"unsupported method {method!r}"),)
        )

    def mcp_status(self, params: JsonDict) -> JsonDict:
        """``mcpServerStatus/list``: the client's servers of one thread, or of all."""
        wanted = params.get("threadId")
        threads = [t for t in self.threads.values() if wanted in (None, t.id)]
        data = [entry for thread in threads for entry in thread.mcp.codex_list()]
        name = params.get("serverName")
        return {"data": [e for e in data if name in (None, e["name"])], "nextCursor": None}

    def open_fields(self, params: JsonDict) -> JsonDict:
        if params.get("method") == "thread/resume":
            return {"resume": params.get("threadId")}
        mode = SANDBOXES.get(str(params.get("sandbox")), ("default", ""))[0]
        return {
            "body": self.args.body,
            "model": params.get("model"),
            "cwd": str(Path(params.get("cwd") or self.cwd).resolve()),
            "permission_mode": mode,
            **instructions(params),
        }

    def opened(self, request_id: Any, params: JsonDict, info: JsonDict) -> tuple[JsonDict, ...]:
        """The ``thread/start`` (or ``resume``) answer and ``thread/started``."""
        thread_id = str(info["session_id"])
        cwd = str(info.get("cwd") or params.get("cwd") or self.cwd)
        servers = instructions(params)["mcp_servers"] or {}
        mcp = McpReport(servers, body=str(info.get("body") or "chorus"))
        self.threads[thread_id] = CodexThread(thread_id, cwd, rules_of(params, cwd), mcp)
        now = int(time.time())
        thread = {
            "id": thread_id,
            "sessionId": thread_id,
            "cliVersion": CODEX_VERSION,
            "createdAt": now,
            "updatedAt": now,
            "cwd": cwd,
            "ephemeral": False,
            "modelProvider": "chorus",
            "preview": "",
            "source": "appServer",
            "status": {"type": "idle"},
            "turns": [],
        }
        sandbox = SANDBOXES.get(str(params.get("sandbox")), ("", "readOnly"))[1]
        result = {
            "thread": thread,
            "approvalPolicy": params.get("approvalPolicy") or "on-request",
            "approvalsReviewer": params.get("approvalsReviewer") or "user",
            "cwd": cwd,
            "model": str(info.get("model") or info.get("body") or "chorus"),
            "modelProvider": "chorus",
            "sandbox": {"type": sandbox},
        }
        return response(request_id, result), notification("thread/started", {"thread": thread})

    def asks_client(self, params: JsonDict) -> bool:
        """Whether the thread's client answers approvals: not with ``approvalPolicy
        never`` nor with ``approvalsReviewer auto_review`` (then Chorus's policy is the
        reviewer)."""
        return rules_of(params, self.cwd).asks_client

    @staticmethod
    def settled(thread: CodexThread, ask: CanUseToolRequest) -> JsonDict | None:
        """A review the thread's approval policy and sandbox pass without asking the
        client (None: ask it)."""
        if not ask.review:
            return None  # Chorus's policy asks: the client answers
        base = ask.input.get("cwd")
        where = base if isinstance(base, str) else None
        if thread.rules.needs_approval(ask.tool_name, ask.input, where):
            return None
        return verdict(True)

    @staticmethod
    def approval_request(request_id: str, thread: CodexThread, ask: CanUseToolRequest) -> JsonDict:
        """Chorus's policy asks: an approval request to the client."""
        active = thread.active
        params: JsonDict = {
            "threadId": thread.id,
            "turnId": active.id if active else "",
            "itemId": ask.call_id or ask.flag_id,
        }
        if not ask.review:
            params["reason"] = ask.reason
        if ask.tool_name in EDIT_TOOLS:
            return {"id": request_id, "method": "item/fileChange/requestApproval", "params": params}
        command = ask.input.get("command")
        params |= {
            "command": unwrap_shell(command) if isinstance(command, str) else json.dumps(ask.input),
            "cwd": thread.cwd,
            "availableDecisions": ["accept", "decline", "cancel"],
        }
        return {
            "id": request_id,
            "method": "item/commandExecution/requestApproval",
            "params": params,
        }

    @staticmethod
    def approval_verdict(reply: JsonDict) -> JsonDict:
        """The client's decision as Chorus's verdict."""
        result = reply.get("result")
        decision = result.get("decision") if isinstance(result, dict) else None
        if isinstance(decision, dict):  # acceptWithExecpolicyAmendment and the like
            decision = next(iter(decision), None)
        if decision in ACCEPTING or str(decision).startswith("accept"):
            return verdict(True)
        return verdict(False, f"the Codex client answered {decision or 'nothing'}")

    @staticmethod
    def remember(thread: CodexThread, ask: CanUseToolRequest, reply: JsonDict) -> None:
        """``acceptForSession`` of a command: the thread runs it again without asking."""
        result = reply.get("result")
        command = ask.input.get("command")
        for_session = isinstance(result, dict) and result.get("decision") == "acceptForSession"
        if for_session and isinstance(command, str):
            thread.rules.accepted.add(unwrap_shell(command))

    def turn_started(self, request_id: Any, thread: CodexThread) -> tuple[JsonDict, ...]:
        turn = thread.new_turn()
        started = {"threadId": thread.id, "turn": turn_json(turn)}
        return response(request_id, {"turn": turn_json(turn)}), notification(
            "turn/started", started
        )


# -- the loop -----------------------------------------------------------------------------


@dataclass
class _Thread:
    link: Link
    state: CodexThread
    shown: CallsShown = field(default_factory=CallsShown)


class CodexFront(StdioFront):
    """The Codex app-server protocol over Chorus sessions (one link per thread)."""

    name = "codex-app-server"

    def __init__(self, args: CodexArgs, cwd: str | None = None) -> None:
        super().__init__()
        self.codec = CodexCodec(args, cwd or os.getcwd())
        self.threads: dict[str, _Thread] = {}

    def fatal_frame(self, message: str) -> JsonDict | None:
        return notification("error", {"error": {"message": message}, "willRetry": False})

    async def on_line(self, line: str) -> None:
        await self._handle(self.codec.on_line(line))

    async def _handle(self, step: Step) -> None:
        for frame in step.frames:
            write_line(frame)
        if step.kind == "open":
            await self._open(step.request_id, step.fields)
        elif step.kind in {"turn/start", "turn/steer", "turn/interrupt"}:
            self.spawn(self._turn_request(step, self.threads[step.thread_id]))
        elif step.kind == "answer":
            self.answered(str(step.request_id), step.fields)

    async def _ask(self, thread_id: str, ask: CanUseToolRequest) -> JsonDict:
        """A call the policy allowed (a review) or asks about: an approval request to
        the client where ``codex app-server`` would send one."""
        thread = self.codec.threads[thread_id]
        settled = self.codec.settled(thread, ask)
        if settled is not None:
            return settled
        if thread_id in self.threads:  # its item/started first, as app-server does
            await self.threads[thread_id].shown.after(ask.call_id)
        request_id = f"chorus-{uuid.uuid4().hex[:12]}"
        frame = self.codec.approval_request(request_id, thread, ask)
        answer = await self.ask_client(request_id, frame, seconds_left(ask))
        if answer is None:
            return verdict(ask.default == "allow", "the Codex client did not answer in time")
        self.codec.remember(thread, ask, answer)
        return self.codec.approval_verdict(answer)

    async def _open(self, request_id: Any, params: JsonDict) -> None:
        box: list[Link] = []

        async def ask(request: CanUseToolRequest) -> JsonDict:
            return await self._ask(box[0].session_id, request)

        takes = self.codec.asks_client(params)
        try:
            link = await self.stack.enter_async_context(Link.connect(ask if takes else None))
            box.append(link)
            info = await link.open(**self.codec.open_fields(params), review_calls=takes)
        except LinkError as exc:
            write_line(failure(request_id, INTERNAL_ERROR, str(exc)))
            raise
        except ResponseError as exc:
            write_line(failure(request_id, INVALID_PARAMS, exc.message))
            return
        for frame in self.codec.opened(request_id, params, info):
            write_line(frame)
        thread = _Thread(link, self.codec.threads[link.session_id])
        self.threads[link.session_id] = thread
        self.spawn(self._pump(thread))

    async def _turn_request(self, step: Step, thread: _Thread) -> None:
        if step.kind == "turn/start":
            for frame in self.codec.turn_started(step.request_id, thread.state):
                write_line(frame)
            await thread.link.user(str(step.fields["text"]))
            return
        subtype = "interrupt" if step.kind == "turn/interrupt" else "steer"
        try:
            await thread.link.control(subtype, **step.fields)
        except ResponseError as exc:
            write_line(failure(step.request_id, INVALID_PARAMS, exc.message))
            return
        active = thread.state.active
        result = {"turnId": active.id if active else ""} if subtype == "steer" else {}
        write_line(response(step.request_id, result))

    async def _pump(self, thread: _Thread) -> None:
        async for event in thread.link.events():
            for frame in thread.state.on_event(event):
                write_line(frame)
            if isinstance(event, ToolCall):
                thread.shown.shown(event.call_id)


def main(argv: Sequence[str] | None = None) -> None:
    """``chorus-codex``: ``codex app-server --listen stdio://``, Chorus underneath."""
    try:
        args = parse_codex_argv(sys.argv[1:] if argv is None else argv, dict(os.environ))
    except UsageError as exc:
        print(f"chorus-codex: {exc}", file=sys.stderr)
        sys.exit(2)
    if args.version:
        print(f"codex-cli {CODEX_VERSION} (Chorus front)")
        sys.exit(0)
    sys.exit(run_front(CodexFront(args)))
