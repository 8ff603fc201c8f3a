"""The Claude Code body: one long-lived ``claude -p`` process speaking stream-json.

Lifecycle: :meth:`ClaudeBody.start` spawns the CLI and sends ``initialize``
(when ``--resume`` names an unknown session, it starts a fresh session once and
emits a :class:`Notice`); :meth:`turn` writes a user message and yields events
up to the turn's terminal event; controls may be called from another task
while a turn streams; :meth:`close` is idempotent and bounded.

Tasks: one runner task per process owns a TaskGroup holding the permission
handlers; the runner reads stdout through the codec, routes control responses
to the :class:`RequestRouter`, answers the CLI's own requests, and queues
everything else. When stdout ends it reports the end (closed, crashed, or
killed by an escalated interrupt) as events, never as an exception.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from pathlib import Path
from typing import Any, ClassVar

from chorus._errors import (
    BodyCrashedError,
    LineTooLongError,
    UnsupportedControlError,
    UserError,
)
from chorus.bodies._body import READER_WAIT, Body, BodyOptions, McpAnswer, join_task
from chorus.bodies._capabilities import Capabilities, Support
from chorus.bodies._control import RequestRouter
from chorus.bodies._detached import BodyHandle, stdout_before
from chorus.bodies._inject import claude_args
from chorus.bodies._lifecycle import BodyState
from chorus.bodies._permissions import PermissionAnswer
from chorus.bodies._transport import AgentTransport, SpawnSpec
from chorus.bodies.claude._codec import (
    BODY_NAME,
    CANCEL_SUBTYPE,
    MCP_SUBTYPE,
    ClaudeCodec,
    StdinLine,
)
from chorus.bodies.claude._errors import control_payload
from chorus.bodies.claude._spawn import BIDI_FLAGS, executable, session_flags, spawn_spec
from chorus.events import (
    CompatibilityWarning,
    ControlRequestEvent,
    ControlResponseEvent,
    ErrorCode,
    ErrorInfo,
    Event,
    JsonDict,
    Notice,
    PermissionDecision,
    PermissionRequest,
    StatusChanged,
    Steer,
    TurnCompleted,
    TurnFailed,
)

#: How long the first ``initialize`` may take (a cold 381 MB binary; the SDK allows 60 s).
#: ``options.extra["initialize_timeout"]`` overrides it.
INITIALIZE_TIMEOUT = 60.0
_KILLED = "the CLI did not end the turn after interrupt; process group killed"

_Router = RequestRouter[ControlResponseEvent]


_RESTARTED = "Chorus restarted while this call ran; it may or may not have taken effect"
#: The MCP requests a detached body's owners took, one JSON string a line.
MCP_TAKEN = "mcp-taken"


def _read_taken(path: Path) -> set[str]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return set()
    return {str(json.loads(line)) for line in lines if line.strip()}


def _rpc_error(message: object, text: str) -> JsonDict:
    """A JSON-RPC internal error answering ``message`` (its id, when it has one)."""
    rid = message.get("id") if isinstance(message, dict) else None
    return {"jsonrpc": "2.0", "id": rid, "error": {"code": -32603, "message": text}}


def _too_long(message: object) -> JsonDict:
    """The error for a request whose answer is over the line cap."""
    return _rpc_error(message, "the answer is too long for the CLI's stdin")


async def _cut_off(message: JsonDict) -> JsonDict | None:
    """The answer to an MCP message a previous owner of the body read before it died:
    an error, as an HTTP server's dropped connection would be; never a second run of
    a tool call it may have made (an answer it gave is kept: the CLI ignores this one)."""
    if "id" not in message:
        return None
    return _rpc_error(message, _RESTARTED)


class ClaudeBody(Body):
    """Claude Code over bidirectional stream-json with the control protocol.

    ``native_session_id`` stays ``None`` until the CLI confirms a session
    (``options.resume`` is only a request), so a store that persists it never
    records an id the CLI refused.
    """

    name: ClassVar[str] = BODY_NAME
    replaces_system_prompt: ClassVar[bool] = True  # --system-prompt
    tells_denials: ClassVar[bool] = True  # the reason is in the tool result
    detachable: ClassVar[bool] = True
    capabilities: ClassVar[Capabilities] = Capabilities(
        interrupt=Support.NATIVE,
        set_model=Support.NATIVE,
        set_permission_mode=Support.NATIVE,
        max_thinking_tokens=Support.NATIVE,
        steer=Support.NATIVE,
        permission_callback=Support.NATIVE,
        resume=Support.NATIVE,
        fork=Support.UNSUPPORTED,
        usage=Support.NATIVE,
        cost=Support.NATIVE,
        rate_limit_signal=Support.NATIVE,
        mcp_status=Support.NATIVE,
        denial_reason=Support.NATIVE,  # (wording) can_use_tool's deny message
    )

    def __init__(self, options: BodyOptions) -> None:
        super().__init__(options)
        self.native_session_id = None
        self.init_info: JsonDict = {}
        self._codec = ClaudeCodec()
        self._router = _Router(self.name)
        self._tg: asyncio.TaskGroup | None = None
        self._asks: dict[str, asyncio.Task[None]] = {}
        self._mcp_calls: set[asyncio.Task[None]] = set()  # in-band MCP messages in answer
        self._mcp_taken: set[str] | None = None  # read from the run directory when needed
        self._interrupt_lock = asyncio.Lock()
        #: Why Chorus stops the running turn when not asked to (its deadline passed).
        self._stop: ErrorInfo | None = None
        #: The session ``--resume`` asked for, until the CLI confirms or refuses it.
        self._resume_asked: str | None = None
        self._steers_unread = 0  # steered messages no model call has taken yet
        self._followups = 0  # TurnCompleted events that a steer's follow-up turn continues

    # -- lifecycle hooks (the sequence is :class:`Body`'s) -----------------------------

    async def _spawn(self) -> None:
        await self._spawn_cli(self.options.resume)

    async def _handshake(self) -> None:
        """``initialize``; a ``--resume`` the CLI refused starts a fresh session, once,
        visibly (the process exits: the start goes on with a new one)."""
        resume = self.options.resume
        try:
            self.init_info = await self._initialize()
        except BodyCrashedError:
            await join_task(self._reader, READER_WAIT)
            if not (resume and self._life.state is BodyState.RESPAWNING):
                raise
            await self._fresh_after_failed_resume(resume)
            await self._resumed(False, f"Claude session {resume} was not found")
            return
        await self._resumed(resume is not None, "no native session to resume")

    async def _initialize(self) -> JsonDict:
        return await self._control("initialize", timeout=self._init_timeout(), hooks=None)

    async def _fresh_after_failed_resume(self, resume: str) -> None:
        """``--resume`` named no session the CLI knows: start a new one, once, visibly."""
        await self._emit(
            Notice(
                message=f"Claude session {resume} was not found; started a new session",
                kind="resume_fallback",
            )
        )
        if self._transport is not None:
            await self._transport.close()  # already exited; this reaps it
        self._fresh_wire()
        self._life.to(BodyState.STARTING)
        await self._spawn_cli(None)
        self.init_info = await self._initialize()

    def _fresh_wire(self) -> None:
        self._codec = ClaudeCodec()
        self._router = _Router(self.name)

    def _init_timeout(self) -> float:
        configured = self.options.extra.get("initialize_timeout")
        if isinstance(configured, int | float):
            return float(configured)
        return max(self.options.control_timeout, INITIALIZE_TIMEOUT)

    async def _emit(self, event: Event) -> None:
        if event.native_session_id is None and self.native_session_id is not None:
            event = event.model_copy(update={"native_session_id": self.native_session_id})
        if isinstance(event, TurnFailed):
            event = event.model_copy(update={"error": self._stopped_error(event.error)})
        await super()._emit(event)

    def _stopped_error(self, cause: ErrorInfo) -> ErrorInfo:
        """An interrupted turn's error, or why Chorus stopped it (its deadline)."""
        if self._stop is None or cause.code is not ErrorCode.INTERRUPTED:
            return cause
        return self._stop.model_copy(update={"native": cause.native})

    async def _spawn_cli(self, resume: str | None) -> None:
        argv = [str(executable(self.options)), *BIDI_FLAGS]
        argv += session_flags(
            model=self.options.model, permission_mode=self.permission_mode, resume=resume
        )
        argv += [*claude_args(self.options, inband=True), *self.options.extra_args]
        transport = await self._start_cli(spawn_spec(self.options, argv))
        self._transport = transport
        self._resume_asked = resume
        await self._begin_reading(transport)

    def _attach_spec(self) -> SpawnSpec:
        return spawn_spec(self.options, [str(executable(self.options))])

    def _rebuild(self, handle: BodyHandle) -> None:
        """Feed the codec what it read before ``handle.offset``, emitting nothing."""
        try:
            seen = stdout_before(handle.run_dir, handle.offset)
        except OSError as exc:
            raise BodyCrashedError(
                f"body output file is gone: {exc}", exit_code=None, stderr_tail=""
            ) from exc
        for line in seen:
            for event in self._codec.feed(line):
                self._observe(event, self._codec)

    def _stop_handlers(self) -> None:
        for task in [*self._asks.values(), *self._mcp_calls]:
            task.cancel()

    # -- the runner: stdout -> events ---------------------------------------------------

    async def _read_stdout(self, transport: AgentTransport, skip: int) -> None:
        """Read stdout to its end; ``skip``: events of the first line already handed out
        (after :meth:`attach`). Detached, each event is marked with its stdout position.
        The codec and router are this process's (a fresh start replaces them)."""
        codec, router = self._codec, self._router
        async with asyncio.TaskGroup() as tg:
            self._tg = tg
            async for event in self._marked(transport, codec.feed, skip):
                await self._dispatch(event, codec, router)
            await self._process_ended(transport, router)

    async def _dispatch(self, event: Event, codec: ClaudeCodec, router: _Router) -> None:
        if isinstance(event, ControlResponseEvent):
            router.resolve(event.request_id, event)
            await self._emit(event)
        elif isinstance(event, PermissionRequest):
            await self._emit(event)
            assert self._tg is not None
            self._asks[event.request_id] = self._tg.create_task(self._ask(event, codec))
        elif isinstance(event, ControlRequestEvent) and (answer := self._inband(event)):
            if self.dropping or self._taken_before(event.request_id):
                answer = _cut_off  # a previous owner answered it, or died doing so
            await self._emit(event)  # in the log as the CLI sent it (the replay checks)
            assert self._tg is not None
            task = self._tg.create_task(self._mcp(event, answer, codec))
            self._mcp_calls.add(task)
            task.add_done_callback(self._mcp_calls.discard)
        elif isinstance(event, ControlRequestEvent):
            await self._cli_request(event, codec)
        elif self._resume_asked and codec.is_resume_failure(event):
            # Not a turn: the start goes on with a fresh session and a Notice.
            self._life.to(BodyState.RESPAWNING)
        else:
            self._observe(event, codec)
            await self._emit(event)

    def _observe(self, event: Event, codec: ClaudeCodec) -> None:
        if codec.session_id is not None:
            self.native_session_id = codec.session_id
            self._resume_asked = None
        if codec.model is not None:
            self.model = codec.model
        if isinstance(event, StatusChanged) and event.state == "requesting":
            self._steers_unread = 0  # this model call carries them
        elif isinstance(event, TurnCompleted) and self._steers_unread:
            self._steers_unread = 0  # the CLI now runs them as a follow-up turn
            self._followups += 1
        elif isinstance(event, TurnCompleted | TurnFailed):
            self._end_turn()

    def continues_after(self, event: Event) -> bool:
        return isinstance(event, TurnCompleted) and self._followups > 0

    def _ends_turn(self, event: Event) -> bool:
        if isinstance(event, TurnCompleted) and self._followups:
            self._followups -= 1
            return False
        return super()._ends_turn(event)

    async def _process_ended(self, transport: AgentTransport, router: _Router) -> None:
        """Stdout closed: wake control waiters, stop handlers, report how it ended."""
        code = await transport.wait(5.0)
        tail = transport.stderr_tail
        router.fail_all(BodyCrashedError("agent process ended", exit_code=code, stderr_tail=tail))
        self._stop_handlers()
        if self._life.state is BodyState.RESPAWNING:
            return  # a refused resume: the start goes on with a new process
        for event in self._end_report(code, tail, _KILLED):
            await self._emit(event)
        self._life.exited()

    # -- requests from the CLI ------------------------------------------------------------

    async def _ask(self, event: PermissionRequest, codec: ClaudeCodec) -> None:
        """Answer one ``can_use_tool`` through the permission callback."""
        try:
            answer = await self._decide(event, codec)
            await self._emit(
                PermissionDecision(
                    request_id=event.request_id, decision=answer.decision, reason=answer.reason
                )
            )
            await self._write(codec.permission_answer(event.request_id, answer))
        except BodyCrashedError:
            pass  # the process is gone; _process_ended reports it
        finally:
            self._asks.pop(event.request_id, None)

    async def _decide(self, event: PermissionRequest, codec: ClaudeCodec) -> PermissionAnswer:
        ask = codec.permission_ask(event.request_id, cwd=str(self.options.cwd))
        if ask is None:
            return PermissionAnswer.deny("permission request withdrawn")
        try:
            return await self.options.permission_callback(ask)
        except Exception as exc:  # a policy bug must deny the tool, not kill the session
            return PermissionAnswer.deny(f"permission callback failed: {exc!r}")

    def _inband(self, event: ControlRequestEvent) -> McpAnswer | None:
        """How to answer an ``mcp_message`` for one of our in-band servers (None for
        any other request, or a server the CLI names that we did not give it)."""
        if event.subtype != MCP_SUBTYPE:
            return None
        server = self.options.mcp_servers.get(str(event.payload.get("server_name")))
        return server.inband if server is not None else None

    async def _mcp(self, event: ControlRequestEvent, answer: McpAnswer, codec: ClaudeCodec) -> None:
        """Answer one MCP message the CLI sent on its stdio (the server audits the
        tools' calls)."""
        message = event.payload.get("message")
        try:
            if not isinstance(message, dict):
                raise ValueError("the mcp_message carries no JSON-RPC object")
            line = codec.mcp_answer(event.request_id, await answer(message))
        except Exception as exc:  # the CLI gets a failed request, the session goes on
            line = codec.control_error(event.request_id, f"Chorus's MCP server failed: {exc}")
        with contextlib.suppress(BodyCrashedError, LineTooLongError):
            try:
                await self._write(line)
            except LineTooLongError:  # an answer over the line cap: its request fails
                await self._write(codec.mcp_answer(event.request_id, _too_long(message)))

    def _taken_before(self, request_id: str) -> bool:
        """Whether an owner of this detached body already took MCP request
        ``request_id`` (listed in its run directory, as this one is now): a daemon
        killed after running a tool call, before its event was stored, has it
        listed, and the next owner does not run it again."""
        run_dir = self.options.run_dir
        if run_dir is None:
            return False
        if self._mcp_taken is None:
            self._mcp_taken = _read_taken(run_dir / MCP_TAKEN)
        if request_id in self._mcp_taken:
            return True
        self._mcp_taken.add(request_id)
        with (run_dir / MCP_TAKEN).open("a", encoding="utf-8") as taken:
            taken.write(json.dumps(request_id) + "\n")  # kept when this process dies
        return False

    async def _cli_request(self, event: ControlRequestEvent, codec: ClaudeCodec) -> None:
        await self._emit(event)
        if event.subtype == CANCEL_SUBTYPE:
            task = self._asks.pop(event.request_id, None)
            if task is not None:
                task.cancel()
                await self._emit(
                    PermissionDecision(
                        request_id=event.request_id,
                        decision="deny",
                        reason="withdrawn by the agent",
                        source="agent",
                    )
                )
            return
        # hook_callback, elicitation, an MCP server we did not give...: none of ours.
        message = f"Chorus does not handle control request {event.subtype!r}"
        with contextlib.suppress(BodyCrashedError):
            await self._write(codec.control_error(event.request_id, message))

    # -- writing and controls -----------------------------------------------------------------

    async def _write(self, line: StdinLine) -> None:
        """The only path to the CLI's stdin: codec-made lines only."""
        transport = self._transport
        if transport is None:
            raise BodyCrashedError("Claude body not started", exit_code=None, stderr_tail="")
        await transport.write_line(line.text)

    async def _control(
        self,
        subtype: str,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 - forwarded to the router's deadline
        **fields: Any,
    ) -> JsonDict:
        """Send one control request and return its success payload; raises what
        :func:`control_payload` and :meth:`RequestRouter.call` raise."""
        request_id, line = self._codec.control_request(subtype, **fields)

        async def send() -> None:
            event = ControlRequestEvent(request_id=request_id, subtype=subtype, payload=fields)
            await self._emit(event)
            await self._write(line)

        deadline = timeout if timeout is not None else self.options.control_timeout
        response = await self._router.call(request_id, send, subtype, deadline)
        try:
            return control_payload(self.name, subtype, response)
        except UnsupportedControlError as exc:
            await self._emit(CompatibilityWarning(control=subtype, message=str(exc)))
            raise

    async def _send_prompt(self, prompt: str) -> None:
        self._begin_turn()
        self._stop = None
        try:
            await self._write(self._codec.user_message(prompt))
        except BodyCrashedError:
            self._end_turn()
            raise
        if self._tg is not None:
            self._tg.create_task(self._watch_turn())

    async def steer(self, text: str) -> None:
        """Add ``text`` to the running turn; a :class:`Steer` event records it.

        Claude Code takes a user message written mid-turn into its next model call
        of the same turn. If the model call running now is the turn's last (a
        plain answer, no tool), the CLI answers the message in a follow-up turn
        instead; :meth:`turn` then yields both and ends after the second
        ``TurnCompleted``. Raises :class:`UserError` between turns.
        """
        if not self._life.in_turn:
            raise UserError("no Claude turn is running to steer")
        self._steers_unread += 1
        await self._emit(Steer(text=text))
        await self._write(self._codec.steer_message(text))

    async def _watch_turn(self) -> None:
        """Interrupt a turn that outlives ``options.turn_timeout``; it then fails as timeout."""
        limit = self.options.turn_timeout
        if await self._turn_ended_within(limit):
            return
        message = f"turn exceeded {limit:g}s and was interrupted"
        self._stop = ErrorInfo(code=ErrorCode.TIMEOUT, message=message, retryable=True)
        await self.interrupt()

    async def interrupt(self) -> None:
        """Stop the running turn; returns once it ended. Idempotent; a no-op between turns.

        Sends ``interrupt`` and waits ``options.interrupt_timeout`` for the turn's
        result; if none comes, SIGTERMs (then SIGKILLs) the process group, and the
        turn ends with ``TurnFailed(interrupted)`` plus ``SessionEnded("killed")``.
        """
        async with self._interrupt_lock:
            await self._interrupt_turn(self._send_interrupt)

    async def _send_interrupt(self, limit: float) -> None:
        await self._control("interrupt", timeout=limit)

    async def set_model(self, model: str | None) -> None:
        """Switch model for the next API call (``None``: the CLI's default)."""
        await self._control("set_model", model=model)
        self.model = model

    async def set_permission_mode(self, mode: str) -> None:
        """Switch permission mode; the CLI validates ``mode``."""
        await self._control("set_permission_mode", mode=mode)
        self.permission_mode = mode

    async def set_max_thinking_tokens(self, tokens: int | None) -> None:
        """Cap extended thinking (``None`` restores the session default)."""
        await self._control("set_max_thinking_tokens", max_thinking_tokens=tokens)

    async def mcp_status(self) -> dict[str, Any]:
        """The CLI's MCP servers (``{"mcpServers": [...]}``)."""
        return await self._control("mcp_status")
