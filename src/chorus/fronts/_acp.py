"""The ACP agent front: ``chorus acp`` is an ACP agent on stdio (Zed, acpx, the ACP SDK's
client) whose sessions are Chorus sessions on any body.

The codec (:class:`AcpRenderer`, :func:`stop_reason`, :func:`modes`) is pure: canonical
events in, ACP ``session/update`` payloads and stop reasons out. :class:`AcpFront`
is the thin part: the official SDK's agent side (``acp.run_agent``) reads and writes
stdio, and each ACP session owns one :class:`Link` to the daemon.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from dataclasses import dataclass, field
from typing import Any

import acp
from acp import schema

from chorus.events import (
    CanUseToolRequest,
    CompatibilityWarning,
    Event,
    FileChange,
    JsonDict,
    Plan,
    Queued,
    Text,
    TextDelta,
    Thinking,
    ToolCall,
    ToolOutputDelta,
    ToolResult,
    TurnCompleted,
    TurnFailed,
)
from chorus.fronts._front import CallsShown, Front
from chorus.fronts._link import Link, LinkError, is_turn_end, seconds_left, verdict
from chorus.fronts._rules import ClaudeRules, Roots, claude_input, claude_tool
from chorus.gateway import ResponseError

AGENT_NAME = "chorus"
MODE_NAMES = {
    "default": "Default (ask)",
    "acceptEdits": "Accept edits",
    "plan": "Plan",
    "bypassPermissions": "Bypass permissions",
}
MODEL_OPTION = "model"
#: UCP error codes of a start the request itself made fail (JSON-RPC invalid params).
CLIENT_FAULTS = frozenset(
    {"invalid_request", "unknown_body", "session_not_found", "policy_denied", "session_ended"}
)

#: Chorus's normalized tool name -> ACP tool kind.
TOOL_KINDS: dict[str, schema.ToolKind] = {
    "shell": "execute",
    "shell_output": "execute",
    "read": "read",
    "write": "edit",
    "edit": "edit",
    "delete": "delete",
    "move": "move",
    "search": "search",
    "glob": "search",
    "list": "search",
    "web_fetch": "fetch",
    "web_search": "fetch",
    "think": "think",
}
PLAN_STATUS = {"pending", "in_progress", "completed"}
PLAN_PRIORITY = {"high", "medium", "low"}

Update = (
    schema.AgentMessageChunk
    | schema.AgentThoughtChunk
    | schema.ToolCallStart
    | schema.ToolCallProgress
    | schema.AgentPlanUpdate
)


# -- the codec ----------------------------------------------------------------------------


def ucp_servers(servers: list[Any] | None) -> JsonDict | None:
    """``session/new``'s ``mcpServers`` as UCP ``initialize`` takes them (stdio ones
    whole; another kind by its type, which Chorus reports it cannot pass)."""
    out: JsonDict = {}
    for server in servers or ():
        if isinstance(server, schema.McpServerStdio):
            env = {var.name: var.value for var in server.env}
            out[server.name] = {"command": server.command, "args": server.args, "env": env}
        else:
            out[str(getattr(server, "name", "?"))] = {"type": getattr(server, "type", "other")}
    return out or None


@dataclass
class AcpRenderer:
    """Canonical events -> ACP session updates. Streams deltas; a whole ``text`` or
    ``thinking`` event is shown only when no delta of it was streamed."""

    streamed: set[str] = field(default_factory=set)

    def history(self, event: Event) -> list[Update | schema.UserMessageChunk]:
        """A logged event replayed by ``session/load``: the user's prompts too."""
        if isinstance(event, Queued):
            return [acp.update_user_message_text(event.text)]
        return list(self.updates(event))

    def updates(self, event: Event) -> list[Update]:
        match event:
            case TextDelta() | Text():
                return self._text(event)
            case Thinking():
                return self._thought(event)
            case ToolCall():
                return [tool_call_start(event)]
            case ToolOutputDelta():
                return [acp.update_tool_call(event.call_id, content=[_text_content(event.text)])]
            case ToolResult():
                return [tool_call_end(event)]
            case FileChange() if event.call_id:
                location = schema.ToolCallLocation(path=event.path)
                return [acp.update_tool_call(event.call_id, locations=[location])]
            case CompatibilityWarning():  # what Chorus could not honour, said aloud
                return [acp.update_agent_message_text(f"[Chorus] {event.message}\n")]
            case Plan():
                return [
                    acp.update_plan(
                        [plan_entry(e.content, e.status, e.priority) for e in event.entries]
                    )
                ]
        return []

    def _text(self, event: TextDelta | Text) -> list[Update]:
        key = f"text:{event.message_id or event.turn_id}"
        if isinstance(event, TextDelta):
            self.streamed.add(key)
        elif key in self.streamed or not event.text:
            return []
        return [acp.update_agent_message_text(event.text)]

    def _thought(self, event: Thinking) -> list[Update]:
        key = f"thought:{event.message_id or event.turn_id}"
        if event.delta:
            self.streamed.add(key)
        elif key in self.streamed or not event.text:
            return []
        return [acp.update_agent_thought_text(event.text)]


def _text_content(text: str) -> schema.ContentToolCallContent:
    return acp.tool_content(acp.text_block(text))


def tool_call_start(event: ToolCall) -> schema.ToolCallStart:
    return acp.start_tool_call(
        event.call_id,
        event.title or event.native_tool,
        kind=TOOL_KINDS.get(event.tool, "other"),
        status="in_progress",
        raw_input=event.input,
    )


def tool_call_end(event: ToolResult) -> schema.ToolCallProgress:
    output: JsonDict = {"output": event.output}
    if event.exit_code is not None:
        output["exit_code"] = event.exit_code
    return acp.update_tool_call(
        event.call_id,
        status="failed" if event.is_error else "completed",
        content=[_text_content(event.output)] if event.output else None,
        raw_output=output,
    )


def plan_entry(content: str, status: str, priority: str | None) -> schema.PlanEntry:
    return schema.PlanEntry(
        content=content,
        status=status if status in PLAN_STATUS else "pending",
        priority=priority if priority in PLAN_PRIORITY else "medium",
    )


#: The choices a permission request offers; the first two allow.
PERMISSION_OPTIONS = (
    schema.PermissionOption(option_id="allow", name="Allow", kind="allow_once"),
    schema.PermissionOption(option_id="allow_always", name="Always allow", kind="allow_always"),
    schema.PermissionOption(option_id="reject", name="Reject", kind="reject_once"),
)
ALLOWING = frozenset({"allow", "allow_always"})


def permission_tool_call(ask: CanUseToolRequest) -> schema.ToolCallUpdate:
    """The tool call a ``session/request_permission`` is about: by its own id, the one
    its ``tool_call`` update carries."""
    command = ask.input.get("command")
    title = str(command) if isinstance(command, str) else ask.native_tool
    return schema.ToolCallUpdate(
        tool_call_id=ask.call_id or ask.flag_id,
        title=title,
        kind=TOOL_KINDS.get(ask.tool_name, "other"),
        status="pending",
        raw_input=ask.input,
    )


def permission_verdict(answer: schema.RequestPermissionResponse) -> JsonDict:
    """The client's choice as Chorus's verdict (a cancelled request denies)."""
    outcome = answer.outcome
    if isinstance(outcome, schema.AllowedOutcome) and outcome.option_id in ALLOWING:
        return verdict(True)
    return verdict(False, "the ACP client rejected the tool call")


def always_allowed(answer: schema.RequestPermissionResponse) -> bool:
    outcome = answer.outcome
    return isinstance(outcome, schema.AllowedOutcome) and outcome.option_id == "allow_always"


def rule_verdict(rules: ClaudeRules, ask: CanUseToolRequest) -> JsonDict | None:
    """A review the session's mode settles without the client (None: ask it). The
    modes are Claude Code's, and so is where they ask."""
    if not ask.review:
        return None  # Chorus's policy asks: the client answers
    tool = claude_tool(ask.tool_name, ask.native_tool)
    base = ask.input.get("cwd")
    given = claude_input(tool, ask.input)
    rule = rules.decide(tool, given, base if isinstance(base, str) else None)
    if rule.decision == "ask":
        return None
    return verdict(rule.decision == "allow", rule.reason or None)


def stop_reason(end: TurnCompleted | TurnFailed, *, cancelled: bool) -> schema.StopReason:
    """The prompt's stop reason (ACP: ``cancelled`` once the client cancelled); a
    failed turn that nobody cancelled is an error."""
    if cancelled:
        return "cancelled"
    if isinstance(end, TurnCompleted):
        if "max_turns" in (end.stop_reason, end.terminal_reason):
            return "max_turn_requests"
        return "end_turn"
    if end.error.code == "interrupted":
        return "cancelled"
    raise acp.RequestError.internal_error({"message": end.error.message, "code": end.error.code})


def start_error(exc: LinkError | ResponseError) -> acp.RequestError:
    """A session that could not start, its cause in the message (an editor shows the
    message, rarely ``data``): the daemon out of reach is an internal error, a
    refused start (an unknown body, a folder not allowed) the request's fault."""
    if isinstance(exc, ResponseError):
        message = f"Chorus could not start the session: {exc.message}"
        code = -32602 if exc.code in CLIENT_FAULTS else -32603
        return acp.RequestError(code, message, {"message": exc.message, "code": exc.code})
    return acp.RequestError(-32603, f"Chorus is out of reach: {exc}", {"message": str(exc)})


def modes(current: str) -> schema.SessionModeState:
    available = [schema.SessionMode(id=key, name=name) for key, name in MODE_NAMES.items()]
    return schema.SessionModeState(current_mode_id=current, available_modes=available)


def model_option(current: str, body: str) -> schema.SessionConfigOptionSelect:
    choice = schema.SessionConfigSelectOption(value=current, name=current)
    return schema.SessionConfigOptionSelect(
        id=MODEL_OPTION,
        name="Model",
        description=f"The model of the {body} body",
        type="select",
        current_value=current,
        options=[choice],
    )


def prompt_text(blocks: list[Any]) -> str:
    """The prompt's text (resources by their URI: bodies take text only)."""
    parts: list[str] = []
    for block in blocks:
        if isinstance(block, schema.TextContentBlock):
            parts.append(block.text)
        elif isinstance(block, schema.ResourceContentBlock):
            parts.append(block.uri)
        elif isinstance(block, schema.EmbeddedResourceContentBlock):
            parts.append(getattr(block.resource, "text", "") or block.resource.uri)
    return "\n".join(part for part in parts if part)


# -- the front ----------------------------------------------------------------------------


@dataclass
class _Session:
    link: Link
    stack: contextlib.AsyncExitStack
    rules: ClaudeRules
    renderer: AcpRenderer = field(default_factory=AcpRenderer)
    shown: CallsShown = field(default_factory=CallsShown)
    cancelled: bool = False

    @property
    def mode(self) -> str:
        return str(self.link.info.get("permission_mode") or "default")

    @property
    def model(self) -> str:
        return str(self.link.info.get("model") or "default")


class AcpFront(Front):
    """An ACP agent whose sessions are Chorus sessions (one daemon link each)."""

    name = "acp"

    def __init__(self, body: str | None = None, model: str | None = None) -> None:
        super().__init__()
        self.body = body or os.environ.get("CHORUS_BODY") or None
        self.model = model
        self.sessions: dict[str, _Session] = {}
        self._client: acp.Client | None = None

    async def serve(self) -> None:
        try:
            await acp.run_agent(self)  # type: ignore[arg-type]  # duck-typed Agent
        finally:
            for session in list(self.sessions.values()):
                await session.stack.aclose()

    def fatal_frame(self, message: str) -> JsonDict | None:
        return None  # JSON-RPC has no unsolicited error: each request gets its own

    def on_connect(self, conn: acp.Client) -> None:
        self._client = conn

    async def initialize(
        self,
        protocol_version: int,
        client_capabilities: Any = None,
        client_info: Any = None,
        **_: Any,
    ) -> schema.InitializeResponse:
        from chorus import __version__

        return schema.InitializeResponse(
            protocol_version=acp.PROTOCOL_VERSION,
            agent_capabilities=schema.AgentCapabilities(load_session=True),
            agent_info=schema.Implementation(name=AGENT_NAME, title="Chorus", version=__version__),
            auth_methods=[],
        )

    async def new_session(
        self, cwd: str, mcp_servers: list[Any] | None = None, **_: Any
    ) -> schema.NewSessionResponse:
        fields = {"body": self.body, "model": self.model, "cwd": cwd}
        session = await self._open(cwd, **fields, mcp_servers=ucp_servers(mcp_servers))
        return schema.NewSessionResponse(
            session_id=session.link.session_id,
            modes=modes(session.mode),
            config_options=[model_option(session.model, str(session.link.info.get("body")))],
        )

    async def load_session(self, cwd: str, session_id: str, **_: Any) -> schema.LoadSessionResponse:
        """Re-open a Chorus session; its conversation is replayed as updates first."""
        session = await self._open(cwd, resume=session_id)
        assert self._client is not None
        async for event in session.link.history():
            for update in session.renderer.history(event):
                await self._client.session_update(session.link.session_id, update)
        return schema.LoadSessionResponse(
            modes=modes(session.mode),
            config_options=[model_option(session.model, str(session.link.info.get("body")))],
        )

    async def _open(self, folder: str, **fields: Any) -> _Session:
        """One daemon link for one ACP session: it reviews every call the policy allows
        (the session's mode says which the client is asked about) and takes the
        policy's own asks."""
        stack = contextlib.AsyncExitStack()
        box: list[_Session] = []

        async def ask(request: CanUseToolRequest) -> JsonDict:
            return await self._ask(box[0], request)

        try:
            link = await stack.enter_async_context(Link.connect(ask))
            await link.open(**fields, review_calls=True)
        except (LinkError, ResponseError) as exc:
            await stack.aclose()
            raise start_error(exc) from exc
        session = _Session(link, stack, ClaudeRules(Roots(folder)))
        session.rules.mode = session.mode
        box.append(session)
        self.sessions[link.session_id] = session
        return session

    async def _ask(self, session: _Session, ask: CanUseToolRequest) -> JsonDict:
        """Put a call to the ACP client as ``session/request_permission`` where the
        session's mode asks (every policy ask included)."""
        settled = rule_verdict(session.rules, ask)
        if settled is not None:
            return settled
        await session.shown.after(ask.call_id)  # its tool_call update first
        assert self._client is not None
        request = self._client.request_permission(
            session_id=session.link.session_id,
            tool_call=permission_tool_call(ask),
            options=list(PERMISSION_OPTIONS),
        )
        try:
            answer = await asyncio.wait_for(request, seconds_left(ask))
        except TimeoutError:
            return verdict(ask.default == "allow", "the ACP client did not answer in time")
        if always_allowed(answer):
            tool = claude_tool(ask.tool_name, ask.native_tool)
            session.rules.allow_always(tool, claude_input(tool, ask.input))
        return permission_verdict(answer)

    def _session(self, session_id: str) -> _Session:
        session = self.sessions.get(session_id)
        if session is None:
            raise acp.RequestError.invalid_params({"message": f"no session {session_id!r}"})
        return session

    async def prompt(self, session_id: str, prompt: list[Any], **_: Any) -> schema.PromptResponse:
        session = self._session(session_id)
        text = prompt_text(prompt)
        if not text:
            raise acp.RequestError.invalid_params({"message": "the prompt has no text"})
        session.cancelled = False
        await session.link.user(text)
        async for event in session.link.turn():
            await self._show(session_id, session, event)
            if isinstance(event, TurnCompleted | TurnFailed) and is_turn_end(event):
                reason = stop_reason(event, cancelled=session.cancelled)
                return schema.PromptResponse(stop_reason=reason)
        raise acp.RequestError.internal_error({"message": "the Chorus session closed"})

    async def _show(self, session_id: str, session: _Session, event: Event) -> None:
        assert self._client is not None
        for update in session.renderer.updates(event):
            await self._client.session_update(session_id, update)
        if isinstance(event, ToolCall):
            session.shown.shown(event.call_id)

    async def cancel(self, session_id: str, **_: Any) -> None:
        session = self.sessions.get(session_id)
        if session is None:
            return  # a notification: nothing to answer
        session.cancelled = True
        with contextlib.suppress(ResponseError):
            await session.link.control("interrupt")

    async def set_session_mode(
        self, session_id: str, mode_id: str, **_: Any
    ) -> schema.SetSessionModeResponse:
        session = self._session(session_id)
        answer = await self._control(session, "set_permission_mode", mode=mode_id)
        session.link.info["permission_mode"] = answer.get("mode", mode_id)
        session.rules.mode = session.mode
        return schema.SetSessionModeResponse()

    async def set_config_option(
        self, config_id: str, session_id: str, value: str | bool, **_: Any
    ) -> schema.SetSessionConfigOptionResponse:
        session = self._session(session_id)
        if config_id != MODEL_OPTION or not isinstance(value, str):
            raise acp.RequestError.invalid_params({"message": f"unknown option {config_id!r}"})
        answer = await self._control(session, "set_model", model=value)
        session.link.info["model"] = answer.get("model", value)
        body = str(session.link.info.get("body"))
        return schema.SetSessionConfigOptionResponse(
            config_options=[model_option(session.model, body)]
        )

    async def _control(self, session: _Session, subtype: str, **fields: Any) -> JsonDict:
        try:
            return await session.link.control(subtype, **fields)
        except ResponseError as exc:
            raise acp.RequestError.invalid_params({"message": str(exc), "code": exc.code}) from exc
