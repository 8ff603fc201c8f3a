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
from collections.abc import Callable
from typing import Any, ClassVar

from chorus._errors import (
    BodyCrashedError,
    BodyTimeoutError,
    UnsupportedControlError,
    UserError,
)
from chorus.bodies._body import (
    Body,
    BodyOptions,
    crash_error,
    join_task,
    set_within,
    terminate_group_until,
)
from chorus.bodies._capabilities import Capabilities, Support
from chorus.bodies._control import RequestRouter
from chorus.bodies._detached import BodyHandle, stdout_before
from chorus.bodies._inject import claude_args
from chorus.bodies._permissions import PermissionAnswer
from chorus.bodies._transport import AgentTransport
from chorus.bodies.claude._codec import BODY_NAME, CANCEL_SUBTYPE, ClaudeCodec, StdinLine
from chorus.bodies.claude._errors import ControlRequestError, control_payload
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
    SessionEnded,
    StatusChanged,
    Steer,
    TurnCompleted,
    TurnFailed,
)

#: How long the first ``initialize`` may take (a cold 381 MB binary; the SDK allows 60 s).
#: ``options.extra["initialize_timeout"]`` overrides it.
INITIALIZE_TIMEOUT = 60.0
#: Wait after SIGTERM / SIGKILL of an interrupted turn before giving up on it.
_SIGNAL_GRACE = 3.0

_Router = RequestRouter[ControlResponseEvent]


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
        self._runner: asyncio.Task[None] | None = None
        self._tg: asyncio.TaskGroup | None = None
        self._asks: dict[str, asyncio.Task[None]] = {}
        self._turn_open = False
        self._turn_done = asyncio.Event()
        self._interrupt_lock = asyncio.Lock()
        self._escalated = False
        self._timed_out = False
        self._closing = False
        self._resuming = False
        self._resume_failed = False
        self._steers_unread = 0  # steered messages no model call has taken yet
        self._followups = 0  # TurnCompleted events that a steer's follow-up turn continues

    # -- lifecycle -------------------------------------------------------------------

    async def start(self) -> None:
        """Spawn the CLI and complete ``initialize``. Raises :class:`BodyCrashedError`
        or :class:`BodyTimeoutError` (after closing what it started) on failure."""
        if self._transport is not None:
            raise RuntimeError("ClaudeBody.start() called twice")
        try:
            await self._start_process(self.options.resume)
        except BaseException:
            await self.close()
            raise

    async def _start_process(self, resume: str | None) -> None:
        await self._spawn(resume)
        try:
            self.init_info = await self._control(
                "initialize", timeout=self._init_timeout(), hooks=None
            )
        except BodyCrashedError:
            await self._join_runner()
            if not (resume and self._resume_failed):
                raise
            await self._fresh_after_failed_resume(resume)
            await self._resumed(False, f"Claude session {resume} was not found")
            return
        await self._resumed(resume is not None, "no native session to resume")

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
        self._codec = ClaudeCodec()
        self._router = _Router(self.name)
        await self._spawn(None)
        self.init_info = await self._control("initialize", timeout=self._init_timeout(), hooks=None)

    def _init_timeout(self) -> float:
        configured = self.options.extra.get("initialize_timeout")
        if isinstance(configured, int | float):
            return float(configured)
        return max(self.options.control_timeout, INITIALIZE_TIMEOUT)

    async def _emit(self, event: Event) -> None:
        if event.native_session_id is None and self.native_session_id is not None:
            event = event.model_copy(update={"native_session_id": self.native_session_id})
        if self._timed_out and isinstance(event, TurnFailed):
            event = event.model_copy(update={"error": self._timeout_error(event.error)})
        await super()._emit(event)

    def _timeout_error(self, cause: ErrorInfo) -> ErrorInfo:
        if cause.code is not ErrorCode.INTERRUPTED:
            return cause
        return ErrorInfo(
            code=ErrorCode.TIMEOUT,
            message=f"turn exceeded {self.options.turn_timeout:g}s and was interrupted",
            retryable=True,
            native=cause.native,
        )

    async def _spawn(self, resume: str | None) -> None:
        argv = [str(executable(self.options)), *BIDI_FLAGS]
        argv += session_flags(
            model=self.options.model, permission_mode=self.permission_mode, resume=resume
        )
        argv += [*claude_args(self.options), *self.options.extra_args]
        transport = await self._start_cli(spawn_spec(self.options, argv))
        self._transport = transport
        self._resuming, self._resume_failed = resume is not None, False
        self._runner = asyncio.create_task(self._run(transport, self._codec, self._router))

    @classmethod
    async def attach(
        cls,
        options: BodyOptions,
        handle: BodyHandle,
        *,
        turn_open: bool,
        drop: int = 0,
        counted: Callable[[Event], bool] | None = None,
    ) -> ClaudeBody:
        """Take over a Claude CLI that another process started with ``options.run_dir``
        (a daemon killed since): the codec state is rebuilt from stdout before
        ``handle.offset`` (nothing emitted), then events flow from there on, none
        lost or repeated. ``turn_open``: a turn was running; :meth:`follow` yields
        its rest. Raises :class:`BodyCrashedError` when that process is gone (resume
        natively then). ``drop``/``counted``: see :meth:`Body.drop_handed_out`."""
        body = cls(options)
        spec = spawn_spec(options, [str(executable(options))])
        transport = await body._adopt(spec, handle, drop, counted)
        body._position = (handle.offset, handle.skip)
        body._turn_open = turn_open
        if turn_open:
            body._turn_done.clear()
        body._runner = asyncio.create_task(
            body._run(transport, body._codec, body._router, handle.skip)
        )
        return body

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
        self._turn_open = False

    async def close(self) -> None:
        """Close stdin, then escalate (SIGTERM, SIGKILL); emits ``SessionEnded``. Idempotent."""
        if self._closed:
            return
        self._closed = self._closing = True
        for task in list(self._asks.values()):
            task.cancel()
        if self._transport is not None:
            await self._transport.close()
        await self._join_runner()

    async def _join_runner(self) -> None:
        await join_task(self._runner, 10.0)

    # -- the runner: stdout -> events ---------------------------------------------------

    async def _run(
        self, transport: AgentTransport, codec: ClaudeCodec, router: _Router, skip: int = 0
    ) -> None:
        """Read stdout to its end; ``skip``: events of the first line already handed out
        (after :meth:`attach`). Detached, each event is marked with its stdout position."""
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
        elif isinstance(event, ControlRequestEvent):
            await self._cli_request(event, codec)
        elif self._resuming and codec.is_resume_failure(event):
            # Not a turn: start() turns this into a fresh session and a Notice.
            self._resume_failed = True
        else:
            self._observe(event, codec)
            await self._emit(event)

    def _observe(self, event: Event, codec: ClaudeCodec) -> None:
        if codec.session_id is not None:
            self.native_session_id = codec.session_id
            self._resuming = False
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

    def _end_turn(self) -> None:
        self._turn_open = False
        self._turn_done.set()

    async def _process_ended(self, transport: AgentTransport, router: _Router) -> None:
        """Stdout closed: wake control waiters, stop handlers, report how it ended."""
        code = await transport.wait(5.0)
        tail = transport.stderr_tail
        router.fail_all(BodyCrashedError("agent process ended", exit_code=code, stderr_tail=tail))
        for task in list(self._asks.values()):
            task.cancel()
        if self._resume_failed:
            return
        for event in self._end_events(code, tail):
            await self._emit(event)
        self._end_turn()

    def _end_events(self, code: int | None, tail: str) -> list[Event]:
        if self._closing:
            ended = SessionEnded(reason="closed", exit_code=code)
            if not self._turn_open:
                return [ended]
            error = ErrorInfo(code=ErrorCode.INTERRUPTED, message="the body was closed mid-turn")
            return [TurnFailed(error=error), ended]
        if self._escalated:
            error = ErrorInfo(
                code=ErrorCode.INTERRUPTED,
                message="the CLI did not end the turn after interrupt; process group killed",
                retryable=True,
                native={"exit_code": code, "stderr_tail": tail[-2000:]},
            )
            return [TurnFailed(error=error), SessionEnded(reason="killed", exit_code=code)]
        error = crash_error(code, tail)
        ended = SessionEnded(reason="crashed", exit_code=code, error=error)
        return [TurnFailed(error=error), ended] if self._turn_open else [ended]

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
        # hook_callback, mcp_message, elicitation...: Chorus registers none of them.
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
        self._turn_open, self._escalated, self._timed_out = True, False, False
        self._turn_done.clear()
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
        if not self._turn_open:
            raise UserError("no Claude turn is running to steer")
        self._steers_unread += 1
        await self._emit(Steer(text=text))
        await self._write(self._codec.steer_message(text))

    async def _watch_turn(self) -> None:
        """Interrupt a turn that outlives ``options.turn_timeout``; it then fails as timeout."""
        if await self._turn_ended_within(self.options.turn_timeout):
            return
        self._timed_out = True
        await self.interrupt()

    async def interrupt(self) -> None:
        """Stop the running turn; returns once it ended. Idempotent; a no-op between turns.

        Sends ``interrupt`` and waits ``options.interrupt_timeout`` for the turn's
        result; if none comes, SIGTERMs (then SIGKILLs) the process group, and the
        turn ends with ``TurnFailed(interrupted)`` plus ``SessionEnded("killed")``.
        """
        async with self._interrupt_lock:
            if not self._turn_open or self._transport is None or not self._transport.running:
                return
            loop = asyncio.get_running_loop()
            deadline = loop.time() + self.options.interrupt_timeout
            with contextlib.suppress(BodyTimeoutError, ControlRequestError, BodyCrashedError):
                await self._control("interrupt", timeout=self.options.interrupt_timeout)
            if await self._turn_ended_within(max(0.1, deadline - loop.time())):
                return
            await self._escalate(self._transport)

    async def _escalate(self, transport: AgentTransport) -> None:
        self._escalated = True
        await terminate_group_until(transport, self._turn_done, _SIGNAL_GRACE)

    async def _turn_ended_within(self, seconds: float) -> bool:
        return await set_within(self._turn_done, seconds)

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
