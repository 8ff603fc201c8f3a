"""The Body contract: one running agent CLI behind the canonical event model.

A body owns a transport and a codec. Its reader task feeds stdout lines to the
codec and puts the resulting events on one bounded queue; :meth:`Body.turn`
sends a prompt and yields events until the turn's terminal event
(:class:`TurnCompleted`, :class:`TurnFailed` or :class:`SessionEnded`).
Controls (interrupt, set_model, ...) may be called from another task while a
turn is streaming. A control the body cannot do raises
:class:`UnsupportedControlError`, never silence.

Every body keeps its state in one :class:`~chorus.bodies._lifecycle.Lifecycle`
(new, starting, ready, busy, ... closed), moved only along the shared table.
:meth:`Body.start`, :meth:`Body.attach` and :meth:`Body.close` are written once,
here: the sequence, the start's deadline and its one retry, the error mapping.
A body fills hooks: ``_spawn`` and ``_handshake`` (start), ``_attach_spec``,
``_rebuild`` and ``_begin_reading`` / ``_read_stdout`` (attach), ``_fresh_wire``
(a start begun again), ``_start_failure`` (the error a failed start raises),
``_shutdown`` and ``_stop_handlers`` (close).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import TracebackType
from typing import Any, ClassVar, Self, TypeVar

from chorus._errors import (
    BodyCrashedError,
    BodyError,
    BodyTimeoutError,
    UnsupportedControlError,
    UserError,
)
from chorus.bodies._capabilities import Capabilities
from chorus.bodies._detached import BodyHandle, DetachedTransport, start_transport
from chorus.bodies._lifecycle import FINISHED, TURN_STATES, BodyState, Lifecycle
from chorus.bodies._lifecycle import TRANSITIONS as _MOVES
from chorus.bodies._permissions import PermissionCallback, allow_all
from chorus.bodies._transport import AgentTransport, RawTap, SpawnSpec
from chorus.events import (
    ErrorCode,
    ErrorInfo,
    Event,
    Notice,
    SessionEnded,
    TurnCompleted,
    TurnFailed,
)

PERMISSION_MODES = ("default", "acceptEdits", "plan", "bypassPermissions")
#: A stdout position: (byte offset of a line, events of that line already handed out).
Mark = tuple[int, int]
TERMINAL_TYPES = (TurnCompleted, TurnFailed, SessionEnded)
T = TypeVar("T")
#: How long ``close`` gives the reader task to report the process's end.
READER_WAIT = 10.0
#: Wait after each of SIGTERM / SIGKILL of a turn that ignored the interrupt.
SIGNAL_GRACE = 3.0
#: The states in which Chorus is stopping the running turn (or the whole body).
STOPPING = frozenset({BodyState.INTERRUPTING, BodyState.ESCALATING, BodyState.CLOSING})


class StuckStartError(BodyTimeoutError):
    """A start step got no answer in time while the CLI ran."""


#: Answers one JSON-RPC message for an MCP server (None for a notification).
McpAnswer = Callable[[dict[str, Any]], Awaitable[dict[str, Any] | None]]


@dataclass(frozen=True, slots=True)
class McpServer:
    """An MCP server the body's CLI uses for the session: a program it starts (stdio,
    ``command``) or one it reaches over streamable HTTP (``url``, with ``headers``).
    With ``inband``, a CLI that carries MCP on its own stdio (Claude's ``mcp_message``)
    is given it that way instead, and ``inband`` answers its messages; the others
    still use ``url``."""

    command: str = ""
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    #: The CLI must wait for it before the first model call (Codex otherwise starts
    #: the turn while the server is still starting, and its tools are missing).
    required: bool = False
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    inband: McpAnswer | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class BodyOptions:
    """How to start a body. ``env`` is the child's whole environment when given
    (tests pass an offline env); otherwise the parent's environment is used."""

    cwd: Path
    model: str | None = None
    permission_mode: str = "default"
    resume: str | None = None
    env: Mapping[str, str] | None = None
    executable: Path | None = None
    extra_args: tuple[str, ...] = ()
    permission_callback: PermissionCallback = allow_all
    #: For bodies without a permission callback (the one-shot modes): the native
    #: permission flags the policy chose (``chorus.policy.native_flags``). When set
    #: they replace the body's own flags for ``permission_mode``.
    permission_args: tuple[str, ...] | None = None
    raw_tap: RawTap | None = None
    #: When set, bodies that can (``claude``) start their CLI to outlive this
    #: process: stdio in files under this directory, re-attached by offset.
    run_dir: Path | None = None
    #: The session so far as text (``chorus.router.transcript_bundle``), for when
    #: native resume is impossible or fails: the body then puts it in front of its
    #: first prompt, and says so with a ``Notice`` ("rebuilt from the log").
    history: str | None = None
    control_timeout: float = 15.0
    #: A detached body (``run_dir``) with no process reading it this long ends itself
    #: (``None``: never; the daemon sets ``[daemon] orphan_timeout_s``).
    orphan_timeout: float | None = None
    #: Longest wait for each step of the start while the CLI runs (``[daemon]
    #: body_start_timeout_s``): its stdin pipe, its handshake.
    start_timeout: float = 60.0
    interrupt_timeout: float = 5.0
    turn_timeout: float = 900.0
    extra: Mapping[str, Any] = field(default_factory=dict)
    #: Context Chorus adds to the CLI's own system prompt, through each CLI's channel
    #: (``chorus.bodies._inject``); bodies without one get it before the first prompt.
    system_prompt_append: str | None = None
    #: A client's own system prompt in place of the CLI's (only bodies whose
    #: ``replaces_system_prompt`` is true get one; others have it in the append).
    system_prompt: str | None = None
    #: MCP servers the CLI starts (name → server), Chorus's own among them.
    mcp_servers: Mapping[str, McpServer] = field(default_factory=dict)

    def child_env(self) -> dict[str, str]:
        return dict(self.env) if self.env is not None else dict(os.environ)


def crash_error(exit_code: int | None, stderr_tail: str) -> ErrorInfo:
    """The :class:`ErrorInfo` for a body process that died mid-session."""
    tail = stderr_tail[-2000:]
    return ErrorInfo(
        code=ErrorCode.BODY_CRASHED,
        message=f"agent process exited with code {exit_code}",
        retryable=True,
        native={"exit_code": exit_code, "stderr_tail": tail},
    )


class Body(ABC):
    """Base class of every body. Subclasses set ``name`` and ``capabilities``."""

    name: ClassVar[str]
    capabilities: ClassVar[Capabilities]
    #: Bound on queued events; a stalled consumer pauses the reader (back-pressure).
    max_queued_events: ClassVar[int] = 10_000
    #: True for bodies whose CLI has no system-prompt channel: the context
    #: (``options.system_prompt_append``) goes before the session's first prompt.
    context_in_first_prompt: ClassVar[bool] = False
    #: True for bodies whose CLI takes a whole system prompt of the client's
    #: (``options.system_prompt``) in place of its own.
    replaces_system_prompt: ClassVar[bool] = False
    #: False for bodies that run one process per turn (``alive`` then means "not closed").
    long_lived: ClassVar[bool] = True
    #: True when the body itself gets a denial's reason to the model in the same turn
    #: (in the tool result, or a follow-up prompt); else the session must tell it.
    tells_denials: ClassVar[bool] = False
    #: True for bodies that start their CLI to outlive this process when
    #: ``options.run_dir`` is set, and can :meth:`attach` to it again.
    detachable: ClassVar[bool] = False
    #: What runs, in the words of a stuck start's error ("while app-server ran").
    process_noun: ClassVar[str] = "the agent"

    def __init__(self, options: BodyOptions) -> None:
        self.options = options
        self.native_session_id: str | None = options.resume
        self.model: str | None = options.model
        self.permission_mode = options.permission_mode
        self._events: asyncio.Queue[tuple[Event, Mark | None]] = asyncio.Queue(
            self.max_queued_events
        )
        #: Set by the reader task while it dispatches a line's events: the stdout
        #: position just after each (see :data:`Mark`); consumers' progress is kept
        #: in ``_position`` for :meth:`handle`.
        self._mark: Mark | None = None
        self._marking_task: asyncio.Task[Any] | None = None
        self._position: Mark = (0, 0)
        #: After :meth:`attach`: how many more counted stdout events a previous owner
        #: already handed out (and stored), so they are not handed out twice.
        self._drop = 0
        self._counted: Callable[[Event], bool] = _always
        self._life = Lifecycle(self.name)
        #: The context still to put before the first prompt (see ``_with_context``).
        self._context_pending = (
            options.system_prompt_append
            if self.context_in_first_prompt and options.resume is None
            else None
        )
        #: The running CLI process (one-shot bodies: the current turn's, if any).
        self._transport: AgentTransport | None = None
        #: The task reading a long-lived body's stdout.
        self._reader: asyncio.Task[None] | None = None
        #: While starting: when the start's deadline passes, and the step it is at.
        self._start_deadline: float | None = None
        self._step: str | None = None
        self._history_pending: str | None = None

    # -- what a session needs to know ------------------------------------------------

    @property
    def pid(self) -> int | None:
        """The CLI's process id, also its process group id: the current process, or the
        last one after it ended (``None`` before any started). See :attr:`alive`."""
        return self._transport.pid if self._transport is not None else None

    @property
    def alive(self) -> bool:
        """True while the body can take a turn without being started again: its
        process runs (one-shot bodies: it is started and not closed)."""
        if self._life.finished:
            return False
        if not self.long_lived:
            return True
        return self._transport is not None and self._transport.running

    # -- lifecycle: one skeleton, hooks per body ------------------------------------

    @property
    def state(self) -> BodyState:
        """Where the body is in its lifecycle (:mod:`chorus.bodies._lifecycle`)."""
        return self._life.state

    @classmethod
    async def attach(
        cls,
        options: BodyOptions,
        handle: BodyHandle,
        *,
        turn_open: bool,
        drop: int = 0,
        counted: Callable[[Event], bool] | None = None,
    ) -> Self:
        """Take over a CLI another process started with ``options.run_dir`` (a daemon
        killed since): the codec is rebuilt from stdout before ``handle.offset``
        (nothing emitted), then events flow from there on, none lost or repeated.
        ``turn_open``: a turn was running; :meth:`follow` yields its rest. Raises
        :class:`BodyCrashedError` when that process is gone (resume natively then),
        :class:`UnsupportedControlError` for a body that does not run detached.
        ``drop``/``counted``: see :meth:`drop_handed_out`."""
        if not cls.detachable:
            raise UnsupportedControlError(cls.name, "attach", "the body does not run detached")
        body = cls._for_attach(options)
        body._life.to(BodyState.ATTACHING)
        transport = await body._adopt(body._attach_spec(), handle, drop, counted)
        body._position = (handle.offset, handle.skip)
        body._life.to(BodyState.BUSY if body._turn_running(turn_open) else BodyState.READY)
        await body._begin_reading(transport, handle.skip)
        return body

    @classmethod
    def _for_attach(cls, options: BodyOptions) -> Self:
        """An unstarted body of this class for :meth:`attach`."""
        return cls(options)

    def _attach_spec(self) -> SpawnSpec:
        """How the CLI was started (its environment and folder), for :meth:`attach`."""
        raise UnsupportedControlError(self.name, "attach", "the body does not run detached")

    def _turn_running(self, turn_open: bool) -> bool:
        """After the rebuild: whether a turn runs (the caller's word by default)."""
        return turn_open

    async def _begin_reading(self, transport: AgentTransport, skip: int = 0) -> None:
        """Start the reader task on ``transport`` (long-lived bodies)."""
        self._reader = asyncio.create_task(self._read_stdout(transport, skip))

    async def _read_stdout(self, transport: AgentTransport, skip: int) -> None:
        """The reader task: stdout to its end (long-lived bodies implement it)."""
        raise NotImplementedError

    async def start(self) -> None:
        """Start the CLI (:meth:`_spawn`) and do its handshake (:meth:`_handshake`).
        Call once before :meth:`turn`. A failed start closes what it started and
        raises; a handshake stuck past ``options.start_timeout`` while the CLI runs
        is given up and tried once more (nothing was prompted yet), then fails with
        :class:`BodyTimeoutError` naming the step."""
        self._life.to(BodyState.STARTING)
        try:
            try:
                await self._launch()
            except StuckStartError as exc:
                await self._discard_start(exc)
                await self._launch()
        except BaseException as exc:
            failure = self._start_failure(exc)
            await self.close()
            if failure is exc:
                raise
            raise failure from exc
        if self._life.state is BodyState.STARTING:
            self._life.to(BodyState.READY)

    async def _launch(self) -> None:
        await self._spawn()
        limit = self.options.start_timeout
        self._start_deadline = asyncio.get_running_loop().time() + limit
        try:
            await self._handshake()
        except BodyTimeoutError as exc:
            if self._step is None or isinstance(exc, StuckStartError):
                raise
            raise StuckStartError(
                f"{self.name}: start step {self._step} got no answer within {limit:g}s "
                f"while {self.process_noun} ran ([daemon] body_start_timeout_s)"
            ) from exc
        finally:
            self._start_deadline = self._step = None

    async def _spawn(self) -> None:  # noqa: B027 - a hook, empty by default
        """Start the CLI (one-shot bodies: find it; their processes start per turn)."""

    async def _handshake(self) -> None:
        """Open the session on the started CLI (one-shot bodies: say there is no
        native session to resume when none was asked for)."""
        if self.options.resume is None:
            await self._resumed(False, "no native session to resume")

    def _start_limit(self, step: str) -> float | None:
        """While starting: note ``step`` and return the time left to the start's
        deadline (a timeout then means the start is stuck). None otherwise."""
        if self._start_deadline is None:
            return None
        self._step = step
        return max(0.0, self._start_deadline - asyncio.get_running_loop().time())

    async def _discard_start(self, exc: StuckStartError) -> None:
        """Give up a start stuck in its handshake: end the CLI, with no word of it
        (the body has not started: no ``SessionEnded``), forget what it said, and
        say that it starts once more."""
        self._life.to(BodyState.RESPAWNING)
        reader, self._reader = self._reader, None
        if reader is not None:
            reader.cancel()
            await asyncio.gather(reader, return_exceptions=True)
        if self._transport is not None:
            await self._transport.close()
        self._transport = None
        self._fresh_wire()
        while not self._events.empty():
            self._events.get_nowait()
        await self._emit(Notice(kind="warning", message=f"{exc}; starting it once more"))
        self._life.to(BodyState.STARTING)

    def _fresh_wire(self) -> None:  # noqa: B027 - a hook, empty by default
        """Forget what a discarded process said (a new codec, a new request router)."""

    def _start_failure(self, exc: BaseException) -> BaseException:
        """The error a failed start raises (read before the body is closed)."""
        return exc

    async def close(self) -> None:
        """Shut the CLI down (bounded, escalating). Idempotent."""
        if self._life.finished:
            return
        self._life.to(BodyState.CLOSING)
        try:
            await self._shutdown()
        finally:
            self._life.close_done()

    async def _shutdown(self) -> None:
        """The long-lived bodies' close: stop the handlers, close stdin (then
        SIGTERM, SIGKILL), and reap the reader, which reports the end."""
        self._stop_handlers()
        if self._transport is not None:
            await self._transport.close()
        await join_task(self._reader, READER_WAIT)

    def _stop_handlers(self) -> None:  # noqa: B027 - a hook, empty by default
        """Cancel the tasks answering the CLI's own requests (permission asks)."""

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # -- turn states ---------------------------------------------------------------

    def _begin_turn(self) -> None:
        """Move to ``busy`` for a new turn; raises while a turn runs or once closed.
        A body whose process has exited stays put: writing to it fails on its own."""
        state = self._life.state
        if state in TURN_STATES:
            raise self._already_running()
        if state in FINISHED:
            raise BodyCrashedError(f"{self.name} body is {state}", exit_code=None, stderr_tail="")
        if state is not BodyState.EXITED:
            self._life.to(BodyState.BUSY)

    def _already_running(self) -> Exception:
        return UserError(f"a {self.name} turn is already running; steer() or interrupt() it")

    def _end_turn(self) -> None:
        self._life.end_turn()

    async def _turn_ended_within(self, seconds: float) -> bool:
        return await set_within(self._life.turn_over, seconds)

    @property
    def _stopping(self) -> bool:
        """Chorus is stopping the turn: interrupting it, or closing the body."""
        return self._life.state in STOPPING

    async def _interrupt_turn(self, send: Callable[[float], Awaitable[object]]) -> None:
        """The long-lived bodies' interrupt: ``send`` the native interrupt, wait up to
        ``options.interrupt_timeout`` for the turn's end, then SIGTERM (SIGKILL) the
        process group; the turn then ends ``interrupted`` and the session ``killed``."""
        transport = self._transport
        if self._life.state is not BodyState.BUSY or transport is None or not transport.running:
            return
        self._life.to(BodyState.INTERRUPTING)
        loop = asyncio.get_running_loop()
        limit = self.options.interrupt_timeout
        deadline = loop.time() + limit
        with contextlib.suppress(BodyError):
            await send(limit)
        if not await self._turn_ended_within(max(0.1, deadline - loop.time())):
            await self._escalate(transport)

    async def _escalate(self, transport: AgentTransport) -> None:
        """The turn ignored the interrupt: SIGTERM, then SIGKILL, the process group."""
        if self._life.state is BodyState.INTERRUPTING:
            self._life.to(BodyState.ESCALATING)
            await terminate_group_until(transport, self._life.turn_over, SIGNAL_GRACE)

    def _end_report(
        self, code: int | None, tail: str, killed: str, turn_id: str | None = None
    ) -> list[Event]:
        """How a long-lived body's process ended, as events: closed by us, killed
        after an interrupt it ignored (``killed`` says so), or crashed; a turn it
        held fails first."""
        state = self._life.state
        if state is BodyState.CLOSING:
            ended = SessionEnded(reason="closed", exit_code=code)
            if self._life.previous not in TURN_STATES:
                return [ended]
            error = ErrorInfo(code=ErrorCode.INTERRUPTED, message="the body was closed mid-turn")
            return [TurnFailed(error=error, turn_id=turn_id), ended]
        if state is BodyState.ESCALATING:
            error = ErrorInfo(
                code=ErrorCode.INTERRUPTED,
                message=killed,
                retryable=True,
                native={"exit_code": code, "stderr_tail": tail[-2000:]},
            )
            return [
                TurnFailed(error=error, turn_id=turn_id),
                SessionEnded(reason="killed", exit_code=code),
            ]
        error = crash_error(code, tail)
        ended = SessionEnded(reason="crashed", exit_code=code, error=error)
        if state not in TURN_STATES:
            return [ended]
        return [TurnFailed(error=error, turn_id=turn_id), ended]

    # -- turns -------------------------------------------------------------------

    @abstractmethod
    async def _send_prompt(self, prompt: str) -> None:
        """Write the user turn to the CLI (or spawn a one-shot process)."""

    async def turn(self, prompt: str) -> AsyncIterator[Event]:
        """Send ``prompt`` and yield events up to and including the terminal one."""
        await self._send_prompt(self._with_context(self._with_history(prompt)))
        async for event in self.stream():
            yield event
            if self._ends_turn(event):
                return

    def _with_context(self, prompt: str) -> str:
        """The prompt, with the context in front of a new session's first one for
        bodies that have no other channel for it."""
        context, self._context_pending = self._context_pending, None
        return f"{context}\n\n---\n\n{prompt}" if context else prompt

    def _ends_turn(self, event: Event) -> bool:
        """Whether ``event`` (just taken off the queue) ends the running turn."""
        return isinstance(event, TERMINAL_TYPES)

    def continues_after(self, event: Event) -> bool:
        """True when ``event``, just yielded by :meth:`turn`, is terminal but the turn
        goes on (a steer or denial follow-up inside the same turn). Does not change
        any state: callers may ask before the turn takes its next event."""
        return False

    async def stream(self) -> AsyncIterator[Event]:
        """Yield queued events as they arrive (no end of its own)."""
        while True:
            event, mark = await self._events.get()
            if mark is not None and mark > self._position:
                self._position = mark
            yield event

    async def follow(self) -> AsyncIterator[Event]:
        """The rest of a turn already running (after ``attach``), to its terminal event."""
        async for event in self.stream():
            yield event
            if self._ends_turn(event):
                return

    async def _emit(self, event: Event) -> None:
        await self._enqueue(event.model_copy(update={"body": self.name}))

    async def _enqueue(self, event: Event) -> None:
        """Queue ``event``; the reader task's events carry their stdout position."""
        task = asyncio.current_task()
        mark = self._mark if task is not None and task is self._marking_task else None
        if mark is not None and self._drop > 0:
            self._dropped(event, mark)
            return
        await self._events.put((event, mark))

    def _dropped(self, event: Event, mark: Mark) -> None:
        """A stdout event the previous owner handed out: not again, but past it."""
        if self._counted(event):
            self._drop -= 1
        self._position = max(self._position, mark)

    def drop_handed_out(self, count: int, counted: Callable[[Event], bool]) -> None:
        """Skip the next ``count`` stdout events for which ``counted`` is true (and the
        uncounted ones among them): a previous owner stored them already. Call before
        the reader reads (that is, from :meth:`attach`)."""
        self._drop, self._counted = count, counted

    async def _start_cli(self, spec: SpawnSpec) -> AgentTransport:
        """Start the CLI of ``spec`` with the options' limits: detached (outliving this
        process) when ``options.run_dir`` is set, else on pipes."""
        options = self.options
        return await start_transport(self._limited(spec), options.run_dir, options.raw_tap)

    def _limited(self, spec: SpawnSpec) -> SpawnSpec:
        """``spec`` with the options' start deadline and orphan timeout."""
        options = self.options
        return replace(
            spec, start_timeout=options.start_timeout, orphan_timeout=options.orphan_timeout
        )

    def _rebuild(self, handle: BodyHandle) -> None:
        """Feed the codec what passed before ``handle.offset``, emitting nothing
        (:attr:`detachable` bodies override this)."""
        raise UnsupportedControlError(self.name, "attach", "the body does not run detached")

    async def _adopt(
        self,
        spec: SpawnSpec,
        handle: BodyHandle,
        drop: int,
        counted: Callable[[Event], bool] | None,
    ) -> DetachedTransport:
        """The steps every :meth:`attach` shares: rebuild the codec, skip the events a
        previous owner stored, re-open the detached process. Its first prompt (with
        the context) went long ago."""
        self._rebuild(handle)
        if drop:
            self.drop_handed_out(drop, counted or (lambda _: True))
        transport = await DetachedTransport.attach(
            self._limited(spec), handle, self.options.raw_tap
        )
        self._transport = transport
        self._context_pending = None
        return transport

    @property
    def dropping(self) -> int:
        """Counted events still to skip (0 once the reader is past them)."""
        return self._drop

    async def _marked(
        self,
        transport: AgentTransport,
        decode: Callable[[str], Sequence[T]],
        skip: int = 0,
        before: Callable[[int], None] | None = None,
    ) -> AsyncIterator[T]:
        """Decode stdout lines to their end, yielding each item with :attr:`_mark` set to
        its stdout position (detached transports; the events the caller emits while
        handling an item carry it). ``skip``: items of the first line a previous owner
        handed out already (after :meth:`attach`); ``before``: called with each line's
        offset before it is decoded. Iterate from the reader task."""
        self._marking_task = asyncio.current_task()
        detached = transport if isinstance(transport, DetachedTransport) else None
        start = detached.offset if detached else 0
        async for line in transport.lines():
            if before is not None:
                before(start)
            items = decode(line)[skip:]
            end = detached.offset if detached else 0
            for index, item in enumerate(items, start=skip + 1):
                last = index == skip + len(items)
                self._mark = (end, 0) if last else (start, index)
                yield item
            self._mark, start, skip = None, end, 0

    def handle(self) -> BodyHandle | None:
        """Where a later process re-attaches to this body (detached bodies only): the
        stdout position just after the last event :meth:`stream` handed out."""
        transport = self._transport
        if not isinstance(transport, DetachedTransport):
            return None
        offset, skip = self._position
        return replace(transport.handle(), offset=offset, skip=skip)

    async def detach(self) -> bool:
        """Leave a detached body's CLI running for a later owner (``chorus stop
        --keep-bodies``): stop reading it, emit nothing more. False (and nothing done)
        for a body whose CLI cannot outlive us."""
        transport = self._transport
        if not isinstance(transport, DetachedTransport) or not self._can_detach():
            return False
        self._life.to(BodyState.DETACHED)
        reader = self._marking_task
        if reader is not None and not reader.done():
            reader.cancel()
            await asyncio.gather(reader, return_exceptions=True)
        await transport.detach()
        return True

    def _can_detach(self) -> bool:
        return BodyState.DETACHED in _MOVES[self._life.state]

    def forget_stored(self, offset: int) -> None:
        """A detached body's output before ``offset`` is in the store for good: free
        its disk space (see :meth:`DetachedTransport.discard_before`)."""
        transport = self._transport
        if isinstance(transport, DetachedTransport):
            transport.discard_before(offset)

    # -- resume ----------------------------------------------------------------------

    async def _resumed(self, native: bool, why: str = "") -> None:
        """Say which path a resume took. Without native resume, ``options.history``
        (if any) goes in front of the first prompt: the session is rebuilt from the
        log. Nothing to say for a session that was never resumed and has no history."""
        if native:
            session = self.options.resume or ""
            await self._emit(Notice(kind="resume", message=f"resumed natively ({session})"))
        elif self.options.history:
            self._history_pending = self.options.history
            suffix = f": {why}" if why else ""
            await self._emit(Notice(kind="resume", message=f"rebuilt from the log{suffix}"))

    def _with_history(self, prompt: str) -> str:
        history, self._history_pending = self._history_pending, None
        return f"{history}\n\n{prompt}" if history else prompt

    # -- controls (override where supported) ---------------------------------------

    def _unsupported(self, control: str, detail: str = "") -> UnsupportedControlError:
        return UnsupportedControlError(self.name, control, detail)

    async def interrupt(self) -> None:
        raise self._unsupported("interrupt")

    async def set_model(self, model: str | None) -> None:
        raise self._unsupported("set_model")

    async def set_permission_mode(self, mode: str) -> None:
        raise self._unsupported("set_permission_mode")

    async def set_max_thinking_tokens(self, tokens: int | None) -> None:
        raise self._unsupported("set_max_thinking_tokens")

    async def steer(self, text: str) -> None:
        raise self._unsupported("steer")

    async def mcp_status(self) -> dict[str, Any]:
        raise self._unsupported("mcp_status")


def _always(event: Event) -> bool:
    return True


async def wait_task(task: asyncio.Task[Any] | None, timeout: float) -> bool:  # noqa: ASYNC109
    """Wait up to ``timeout`` for ``task`` to end by itself (it is not cancelled on
    timeout). True when it has ended (or there was none)."""
    if task is None or task.done():
        return True
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(asyncio.shield(task), timeout)
    return task.done()


async def join_task(task: asyncio.Task[Any] | None, timeout: float) -> None:  # noqa: ASYNC109
    """Give ``task`` ``timeout`` seconds to end by itself, then cancel it; reap it."""
    if task is None:
        return
    if not await wait_task(task, timeout):
        task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def interrupt_group(
    task: asyncio.Task[Any],
    transport: AgentTransport,
    timeout: float,  # noqa: ASYNC109
) -> None:
    """The one-shot bodies' interrupt: SIGINT the process group, wait ``timeout`` for
    the turn's task, then escalate (SIGTERM, SIGKILL) and wait for the task."""
    transport.signal_group(signal.SIGINT)
    if not await wait_task(task, timeout):
        await transport.close(grace=0.0)
        await task


async def set_within(event: asyncio.Event, seconds: float) -> bool:
    """True if ``event`` is (or becomes) set within ``seconds``."""
    try:
        await asyncio.wait_for(event.wait(), seconds)
    except TimeoutError:
        return False
    return True


async def terminate_group_until(
    transport: AgentTransport, done: asyncio.Event, grace: float
) -> None:
    """SIGTERM, then SIGKILL, the process group, each followed by up to ``grace``
    seconds for ``done`` (e.g. "the turn ended") to be set."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        transport.signal_group(sig)
        if await set_within(done, grace):
            return
