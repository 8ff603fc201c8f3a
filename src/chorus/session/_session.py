"""A live session: one started body on one stored session, across jobs and brains.

A :class:`Session` owns one body from its start to its end. Its driver task
(owned by the :class:`chorus.session.SessionHub`) is the only reader of the
body's events and the only writer of its turns: between turns it records
whatever the body emits (control echoes, a crash); when a :class:`Turn` is
queued it runs it and records every event up to the terminal one, through the
turn's policy gate, tagged with the turn's job. Turns run one at a time in
arrival order, whoever sent them (a daemon job, a brain on the gateway), so
one session never has two CLI processes and never two turns at once.

Steering adds text to the *running* turn: natively where the body can
(:attr:`Capabilities.steer` native: Codex ``turn/steer``, Claude's mid-turn
user message), otherwise emulated: the turn is interrupted and the steer text
runs at once as a follow-up turn of the same job. Every steer is a
:class:`Steer` event in the log: an emulated one before it reaches the body, a
native one as the body's own echo once the CLI has accepted it (bodies that
steer natively emit it; Codex does on the ``turn/steer`` response).

The lifecycle is :mod:`chorus.session._lifecycle`'s table; a body that ends
(closed, crashed, idle timeout) ends the session, and the hub starts a new one
with the CLI's native resume when the stored session is used again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

from chorus._errors import BodyCrashedError, ChorusError
from chorus._procs import start_time as start_time
from chorus.bodies import (
    TERMINAL_TYPES,
    Body,
    PermissionAnswer,
    PermissionAsk,
    PermissionCallback,
    Support,
    allow_all,
)
from chorus.context import context_items
from chorus.events import (
    UCP_VERSION,
    CompatibilityWarning,
    ErrorCode,
    ErrorInfo,
    Event,
    JsonDict,
    KnownRequest,
    Notice,
    PermissionDecision,
    Queued,
    SessionEnded,
    SessionStarted,
    Steer,
    ToolResult,
    TurnCompleted,
    TurnFailed,
)
from chorus.session._approvals import approval_event
from chorus.session._brains import Authority, BrainAsks
from chorus.session._errors import SessionError
from chorus.session._launcher import checked_mode
from chorus.session._lifecycle import Lifecycle, State
from chorus.session._reattach import HANDLE_KEY, Snapshot, save_snapshot
from chorus.session._spares import Spare
from chorus.store import ORIGIN_CHORUS, SessionRecord, Store, event_origin

if TYPE_CHECKING:  # the policy's engine loads with the first gate, not at the start
    from chorus.policy import PendingFlag, PolicyGate

log = logging.getLogger("chorus.session")
T = TypeVar("T")

#: Called with every event of a turn once it is queued for the log.
EventHook = Callable[[Event], Awaitable[None]]
#: ``(prompt, known item ids) -> (block, ids in it)``: the memory relevant to a turn
#: that the body was not given yet (``BodyLauncher.recall``).
Recall = Callable[[str, set[str]], Awaitable[tuple[str, list[str]]]]

#: The capability (``Capabilities`` field) each body control needs.
CAPABILITY_OF: dict[str, str] = {
    "interrupt": "interrupt",
    "set_model": "set_model",
    "set_permission_mode": "set_permission_mode",
    "set_max_thinking_tokens": "max_thinking_tokens",
    "steer": "steer",
    "mcp_status": "mcp_status",
}


def _future() -> asyncio.Future[Event]:
    return asyncio.get_running_loop().create_future()


@dataclass(eq=False)
class Turn:
    """One prompt for the session's body, and who waits for its end.

    ``gate`` (a job's policy gate) answers the body's permission asks and observes
    its events while the turn runs; without one the session's own gate does.
    ``done`` gets the turn's terminal event.
    """

    prompt: str
    job_id: str | None = None
    gate: PolicyGate | None = None
    model: str | None = None
    #: The mode the CLI should run this turn in (``default``/``plan`` under a gate).
    native_mode: str | None = None
    on_event: EventHook | None = None
    done: asyncio.Future[Event] = field(default_factory=_future)
    steers: list[str] = field(default_factory=list)
    interrupted: bool = False
    #: The rest of a turn a re-attached body is running already: no
    #: prompt is sent, the body's events are followed to the terminal one.
    follow: bool = False


class Session:
    """One stored session and the body that serves it now. Create and start through
    :class:`chorus.session.SessionHub`; every method may be called from any task."""

    def __init__(
        self,
        record: SessionRecord,
        store: Store,
        *,
        gate: PolicyGate | None = None,
        make_gate: Callable[[], PolicyGate | None] | None = None,
        permission: PermissionCallback = allow_all,
        max_queued: int = 100,
        authority: Authority = "escalate-only",
        recall: Recall | None = None,
    ) -> None:
        self.id = record.id
        self.body_name = record.body
        self.cwd = record.cwd
        self.connections = 0
        self.detached_at = time.monotonic()
        self.idle_since = time.monotonic()
        self._record = record
        self._store = store
        self._gate = gate
        #: Builds the session's own gate on first use (a job's turns bring theirs).
        self._make_gate = make_gate if gate is None else None
        self._permission = permission
        self._max_queued = max_queued
        self._life = Lifecycle(record.id)
        self._body: Body | None = None
        self._turns: asyncio.Queue[Turn] = asyncio.Queue()
        self._current: Turn | None = None
        #: A turn to run before anything else (a re-attached body's open turn).
        self._first: Turn | None = None
        self._pending: list[asyncio.Future[Event]] = []
        #: The terminal event of the turn just handed back, until it is noted.
        self._end_seen: Event | None = None
        #: Set once a turn reached its terminal event, or the session ended.
        self._a_turn_over = asyncio.Event()
        self._enqueue_lock = asyncio.Lock()
        #: Brains attached to the session that take permission asks.
        self.brains = BrainAsks(authority, self._brain_note)
        self._recall = recall
        #: Memory items the body was given in a turn's recall block.
        self._recalled: set[str] = set()
        self._wire(gate)

    # -- state ---------------------------------------------------------------------------

    @property
    def body(self) -> Body:
        if self._body is None:
            raise SessionError("internal", f"session {self.id} has no body yet")
        return self._body

    @property
    def state(self) -> State:
        return self._life.state

    @property
    def ended(self) -> bool:
        return self._life.ended

    @property
    def pending(self) -> int:
        """Turns queued and not started."""
        return self._turns.qsize()

    @property
    def unused(self) -> bool:
        """Nothing runs or waits, and no brain is attached."""
        return self.state is State.IDLE and self._turns.empty() and self.connections == 0

    @property
    def gate(self) -> PolicyGate | None:
        """The session's own gate (brain turns, its mode), built on first use."""
        if self._make_gate is not None:
            self._gate, self._make_gate = self._make_gate(), None
            self._wire(self._gate)
        return self._gate

    @property
    def steers_natively(self) -> bool:
        return self._body is not None and self._body.capabilities.steer == Support.NATIVE

    # -- starting and stopping --------------------------------------------------------------

    async def start(self, make_body: Callable[[PermissionCallback], Body]) -> None:
        """Create and start the body (its permission asks go to :meth:`_ask`)."""
        self._body = make_body(self._ask)
        try:
            await self._body.start()
        except BaseException:  # cancellation included: close what was started
            self._life.end()
            with contextlib.suppress(Exception):
                await self._body.close()
            raise
        self._life.to(State.IDLE)
        await self._note_start()

    async def attach(
        self, attach: Callable[[PermissionCallback], Awaitable[Body]], first: Turn | None
    ) -> None:
        """Take over a body that outlived its previous owner; ``first``:
        its open turn, followed before any other."""
        self._body = await attach(self._ask)
        self._first = first
        if first is not None:
            self._wire(first.gate)
        self._life.to(State.IDLE)
        await self._store.update_session(self.id, state="active")

    async def adopt(self, spare: Spare) -> None:
        """Take a pre-started spare body as this session's (see ``_spares``)."""
        self._body = spare.body
        spare.redirect.adopt(self.id, self._ask)
        self._life.to(State.IDLE)
        await self._note_start()

    async def _note_start(self) -> None:
        pid = getattr(self._body, "pid", None)
        fresh, seq = await asyncio.gather(
            self._store.get_session(self.id), self._store.last_seq(self.id)
        )
        transport = dict(fresh.transport)
        if isinstance(pid, int):
            transport.update(pgid=pid, pgid_started=start_time(pid))
        handle = self._body.handle() if self._body is not None else None
        if handle is not None:  # nothing taken from the body yet: position 0
            transport[HANDLE_KEY] = Snapshot(handle, seq).as_dict()
        await self._store.update_session(self.id, state="active", transport=transport)

    async def close(self) -> None:
        """Close the body (bounded by its own escalation); the driver then records the
        :class:`SessionEnded` and returns. Idempotent."""
        if self._body is not None:
            await self._body.close()

    async def detach(self) -> bool:
        """Leave a detached body running for the next daemon; False when
        the body cannot outlive us (then nothing is done)."""
        return self._body is not None and await self._body.detach()

    def touch(self) -> None:
        """Count the session as used now (it was just handed to someone)."""
        self.idle_since = time.monotonic()

    @property
    def busy(self) -> bool:
        """A turn runs or waits."""
        return self._current is not None or not self._turns.empty()

    def can_take(self, body: str, model: str | None, permission_args: object, mode: str) -> bool:
        """Whether a turn for ``body`` with ``model`` in native ``mode`` can run on this
        session's live body (changing model and mode natively if need be) rather than
        on a restarted one."""
        live = self._body
        if self.ended or body != self.body_name or live is None:
            return False
        if permission_args != live.options.permission_args:
            return False
        caps = live.capabilities
        model_ok = model is None or model == live.model or _applies(caps.set_model, live)
        mode_ok = mode == live.permission_mode or _applies(caps.set_permission_mode, live)
        return model_ok and mode_ok

    # -- the driver ------------------------------------------------------------------------

    async def drive(self) -> None:
        """Run queued turns and record every event until the body ends."""
        try:
            first, self._first = self._first, None
            if first is not None:
                await self._run(first)
            while not self.ended:
                turn = await self._idle()
                if turn is None:
                    break
                await self._run(turn)
        except Exception:  # the task boundary: one broken session must not end the others
            log.exception("session %s failed", self.id)
            self._life.end()
            with contextlib.suppress(Exception):
                await self.body.close()
        finally:
            await self._flush()
            await self._drop_queued()
            await self.brains.close()

    async def _idle(self) -> Turn | None:
        """Record events that arrive between turns until a turn is queued (returned) or
        the body ends (None)."""
        async with _closing(self.body.stream()) as stream:
            while not self.ended:
                next_turn = asyncio.ensure_future(self._turns.get())
                next_event = asyncio.ensure_future(_next(stream))
                try:
                    await asyncio.wait({next_turn, next_event}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    event = await _settle(next_event)
                    turn = await _settle(next_turn)
                if event is not None:
                    await self._on_body_event(event, None)
                if turn is not None:
                    return turn if not self.ended else self._refuse(turn)
        return None

    def _refuse(self, turn: Turn) -> None:
        _resolve(turn, SessionEnded(reason="the body ended before the turn started"))

    async def _run(self, turn: Turn) -> None:
        """Run ``turn`` (and the follow-ups its emulated steers add) to its end."""
        self._current = turn
        final: Event = SessionEnded(reason="the turn did not start")
        try:
            await self._adapt(turn)
            prompt: str | None = await self._with_recall(turn.prompt)
            if turn.interrupted:  # before it reached the body: it never does
                final, prompt = _NOT_STARTED, None
            while prompt is not None:
                self._life.to(State.RUNNING)
                final = await self._body_turn(turn, prompt)
                prompt = self._next_steer(turn, final)
            if _crashed(final):
                await self._await_end()
        finally:
            await self._flush()
            self._current = None
            if self.state in (State.RUNNING, State.INTERRUPTING):
                self._life.to(State.IDLE)
            self.idle_since = time.monotonic()
            _resolve(turn, final)
            await self._settle_end()

    async def _note_where(self, event: Event) -> None:
        """The native session id the CLI confirmed, and where its output stands."""
        await self._sync_native_id(event)
        await save_snapshot(self._store, self.id, self.body)

    async def _settle_end(self) -> None:
        """Note what a turn's terminal event leaves to note, once the turn is handed
        back: its job ends meanwhile (a re-attach before this skips the events the
        log already holds, counting from the snapshot before)."""
        event, self._end_seen = self._end_seen, None
        if event is not None:
            await self._note_where(event)

    async def _with_recall(self, prompt: str) -> str:
        """``prompt`` with the relevant memory the body has not been given in front
        (its context at start, and earlier blocks, name what it has)."""
        if self._recall is None:
            return prompt
        known = self._recalled | context_items(self.body.options.system_prompt_append)
        try:
            block, ids = await self._recall(prompt, known)
        except Exception:  # memory is a help; a broken index must not stop the turn
            log.exception("session %s: recalling memory failed", self.id)
            return prompt
        self._recalled.update(ids)
        return f"{block}\n\n{prompt}" if block else prompt

    async def _await_end(self) -> None:
        """After a crash, record the body's own end (bounded), so the session is over
        before anyone queues on it again."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(_END_GRACE), _closing(self.body.stream()) as stream:
                async for event in stream:
                    await self._on_body_event(event, None)
                    if self.ended:
                        return
        self._life.end()

    def _next_steer(self, turn: Turn, final: Event) -> str | None:
        """The text of the emulated steers waiting for this turn's next round, if any."""
        if not turn.steers or turn.interrupted or self.ended:
            return None
        text = "\n\n".join(turn.steers)
        turn.steers.clear()
        if self.state is State.INTERRUPTING:
            self._life.to(State.IDLE)
        return text

    async def _body_turn(self, turn: Turn, prompt: str) -> Event:
        await self._settle_end()  # a steer's follow-up turn: the last one's end first
        final: Event | None = None
        try:
            events_of = self.body.follow() if turn.follow else self.body.turn(prompt)
            async with _closing(events_of) as events:
                async for event in events:
                    final = await self._on_body_event(event, turn)
        except BodyCrashedError as exc:
            return await self._refused(turn, exc, ErrorCode.BODY_CRASHED)
        except ChorusError as exc:  # the body refused the message; the session goes on
            return await self._refused(turn, exc, ErrorCode.UNKNOWN)
        return final or SessionEnded(reason="the body produced no terminal event")

    async def _refused(self, turn: Turn, exc: ChorusError, code: ErrorCode) -> Event:
        notice = Notice(message=f"the body did not take the message: {exc}", kind="error")
        await self._append(notice, turn)
        return TurnFailed(error=ErrorInfo(code=code, message=str(exc)))

    async def _adapt(self, turn: Turn) -> None:
        """Change the live body's model and mode for this turn where it can natively."""
        await self._adapt_mode(turn)
        await self._adapt_model(turn)

    async def _adapt_mode(self, turn: Turn) -> None:
        body = self.body
        if turn.native_mode is None or turn.native_mode == body.permission_mode:
            return
        try:
            await body.set_permission_mode(turn.native_mode)
        except ChorusError as exc:
            message = f"the CLI stays in {body.permission_mode} mode: {exc}"
            await self._append(Notice(message=message, kind="warning"), turn)

    async def _adapt_model(self, turn: Turn) -> None:
        body = self.body
        if turn.model is None or turn.model == body.model:
            return
        if _applies(body.capabilities.set_model, body):
            try:
                await body.set_model(turn.model)
                return
            except ChorusError as exc:
                message = f"the model could not be changed to {turn.model}: {exc}"
                await self._append(Notice(message=message, kind="warning"), turn)
                return
        message = f"{self.body_name} cannot change its model live; the turn runs on {body.model}"
        await self._append(Notice(message=message, kind="warning"), turn)

    # -- recording -----------------------------------------------------------------------

    async def _on_body_event(self, event: Event, turn: Turn | None) -> Event:
        gate = self._gate_for(turn)
        refusal: PermissionDecision | None = None
        if gate is not None:
            event = gate.observe(event)  # audit, and mark untrusted tool output
            if isinstance(event, ToolResult):
                refusal = gate.refusal(event)  # refused without the gate being asked
        if turn is not None and turn.job_id is not None:
            event = event.model_copy(update={"job_id": turn.job_id})
        if turn is not None and isinstance(event, TurnCompleted | TurnFailed):
            event = _inner_end_marked(event, self.body)
        self._pending.append(self._store.append_nowait(self.id, event, origin=event_origin(event)))
        if turn is not None and _ends(event, self.body):
            self._turn_over()
        if isinstance(event, (SessionStarted, *TERMINAL_TYPES)):
            await self._flush()
            if turn is not None and _ends(event, self.body):
                self._end_seen = event  # noted once the turn is handed back: _settle_end
            else:
                await self._note_where(event)
        if turn is not None and turn.on_event is not None:
            await turn.on_event(event)
        if refusal is not None:
            await self._refused_call(refusal, turn)
        if isinstance(event, SessionEnded):
            await self._ended()
        return event

    async def _refused_call(self, decision: PermissionDecision, turn: Turn | None) -> None:
        """Log the policy's rule and reason for a call the body refused by itself, and
        let the job see it (it tells the model when the tool result did not)."""
        if turn is not None and turn.job_id is not None:
            decision = decision.model_copy(update={"job_id": turn.job_id})
        self._pending.append(self._store.append_nowait(self.id, decision, origin=ORIGIN_CHORUS))
        if turn is not None and turn.on_event is not None:
            await turn.on_event(decision)

    def _turn_over(self) -> None:
        """The running turn reached its terminal event: the session is idle from now
        (whoever sees that event and asks is told so)."""
        if self.state in (State.RUNNING, State.INTERRUPTING):
            self._life.to(State.IDLE)
        self._a_turn_over.set()

    async def a_turn_over(self, limit: float) -> None:
        """Until a turn of this session reached its end, or the session did; at most
        ``limit`` seconds."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._a_turn_over.wait(), limit)

    async def _ended(self) -> None:
        self._a_turn_over.set()
        self._life.end()
        await self._store.update_session(self.id, state="ended")

    async def _append(self, event: Event, turn: Turn | None = None) -> Event:
        """Append an event Chorus itself made, in order with the body's."""
        await self._flush()
        if turn is not None and turn.job_id is not None:
            event = event.model_copy(update={"job_id": turn.job_id})
        return await self._store.append(self.id, event, origin=ORIGIN_CHORUS)

    async def _flush(self) -> None:
        pending, self._pending = self._pending, []
        if pending:
            await asyncio.gather(*pending)

    async def _sync_native_id(self, event: Event) -> None:
        """Persist the body's native session id once the CLI has confirmed it, and
        the model it says it runs (what ``sessions list`` shows)."""
        native = self.body.native_session_id
        fresh = await self._store.get_session(self.id)
        model = event.model if isinstance(event, SessionStarted) else None
        if model and model != fresh.model:
            fresh = await self._store.update_session(self.id, model=model)
        ids = native_ids(fresh)
        if not native or ids.get(self.body_name) == native:
            return
        transport = {**fresh.transport, "native_ids": {**ids, self.body_name: native}}
        primary = native if self.body_name == fresh.body else None
        await self._store.update_session(self.id, transport=transport, native_session_id=primary)

    async def _drop_queued(self) -> None:
        dropped = 0
        while not self._turns.empty():
            self._refuse(self._turns.get_nowait())
            dropped += 1
        if dropped:
            message = f"{dropped} queued message(s) not run: the body ended"
            with contextlib.suppress(Exception):
                await self._append(Notice(message=message, kind="error"))

    # -- permissions ---------------------------------------------------------------------

    def _wire(self, gate: PolicyGate | None) -> None:
        """Let ``gate``'s asks reach the brains attached to this session, and log each
        as a ``Flag`` event (``approval``: a tool waits, saying how to answer)."""
        if gate is not None and gate.on_flag is None:
            brains = self.brains.hook(gate)

            async def on_flag(flag: PendingFlag) -> None:
                brains(flag)
                turn = self._current
                await self._append(approval_event(flag, turn.job_id if turn else None), turn)

            gate.on_flag = on_flag

    async def _brain_note(self, message: str) -> None:
        await self._append(Notice(message=message, kind="brain"), self._current)

    def _gate_for(self, turn: Turn | None) -> PolicyGate | None:
        if turn is not None and turn.gate is not None:
            return turn.gate
        return self.gate

    async def _ask(self, ask: PermissionAsk) -> PermissionAnswer:
        """The body's permission callback: the running turn's gate, else the session's."""
        gate = self._gate_for(self._current)
        answer = await (gate if gate is not None else self._permission)(ask)
        # Fronts: a brain's review of what the policy allowed, and a deny's reason told.
        answer = await self.brains.review(gate, ask, answer)
        await self._tell_denial(answer)
        return answer

    async def _tell_denial(self, answer: PermissionAnswer) -> None:
        """A deny's reason on a brain's turn, steered in before the body answers its CLI
        when that CLI's denial carries none (Codex's decline); a job's supervisor tells
        its own turns."""
        turn = self._current
        if turn is None or turn.gate is not None or answer.decision != "deny":
            return
        if not answer.reason or self.body.tells_denials or not self.steers_natively:
            return
        try:
            async with asyncio.timeout(10):
                await self.body.steer(f"[Chorus] That tool call was denied: {answer.reason}")
        except Exception as exc:  # the denial stands; only its reason is lost
            log.info("could not tell the denial on session %s: %r", self.id, exc)

    # -- turns ----------------------------------------------------------------------------

    async def run(self, turn: Turn) -> Event:
        """Queue ``turn`` (never refused for being full: the caller bounds its own work)
        and return its terminal event."""
        self._check_live()
        self._wire(turn.gate)
        self._turns.put_nowait(turn)
        return await asyncio.shield(turn.done)

    async def enqueue(self, text: str) -> int:
        """Queue a brain's message for a turn; returns its position (0: next).

        The message is in the log (a :class:`Queued` event) before it is queued.
        Raises :class:`SessionError` ``queue_full`` or ``session_ended``.
        """
        async with self._enqueue_lock:
            self._check_live()
            if self._turns.qsize() >= self._max_queued:
                message = f"{self._max_queued} messages are queued already; wait or interrupt"
                raise SessionError("queue_full", message)
            position = self._turns.qsize() + (1 if self._current is not None else 0)
            await self._append(Queued(text=text, position=position))
            self._turns.put_nowait(Turn(text))
            return position

    async def steer(self, text: str) -> str:
        """Add ``text`` to the running turn; returns ``native`` or ``emulated``.

        Raises :class:`SessionError` ``not_running`` when no turn runs.
        """
        turn = self._current
        if turn is None or self.state not in (State.RUNNING, State.INTERRUPTING):
            raise SessionError("not_running", f"no turn is running on session {self.id}")
        if self.state is State.INTERRUPTING and turn.interrupted:
            raise SessionError("not_running", f"the turn on session {self.id} is being interrupted")
        if self.steers_natively:  # at once; the body logs the Steer the CLI accepted
            await self.body.steer(text)
            return "native"
        await self._append(Steer(text=text, native=False), turn)
        turn.steers.append(text)
        if self.state is State.RUNNING and self.body.capabilities.supports("interrupt"):
            self._life.to(State.INTERRUPTING)
            await self.body.interrupt()
        return "emulated"

    async def interrupt(self) -> bool:
        """Interrupt the running turn (its emulated steers are dropped); False when
        nothing ran."""
        turn = self._current
        if turn is None or self.ended:
            return False
        turn.interrupted = True
        turn.steers.clear()
        if self.state not in (State.RUNNING, State.INTERRUPTING):
            return True  # not at the body yet: ``_run`` ends it before it starts
        if self.state is State.RUNNING:
            self._life.to(State.INTERRUPTING)
        await self.body.interrupt()
        return True

    # -- controls ---------------------------------------------------------------------------

    async def control(self, request: KnownRequest) -> JsonDict:
        """Run one control on the body and return the success payload.

        Raises :class:`SessionError` (``unsupported`` when the body's declared
        capabilities rule it out, ``session_ended``), or whatever the body raises.
        """
        if request.subtype == "status":
            return await self.status()
        self._check_live()
        capability = CAPABILITY_OF.get(request.subtype)
        if capability is not None and not self.body.capabilities.supports(capability):
            raise SessionError(
                "unsupported", f"body {self.body_name!r} does not support {request.subtype!r}"
            )
        return await self._body_control(request)

    async def _body_control(self, request: KnownRequest) -> JsonDict:
        if request.subtype == "set_model":
            await self.body.set_model(request.model)
            await self._store.update_session(self.id, model=request.model)
            return {"model": request.model}
        if request.subtype == "set_permission_mode":
            return await self._set_mode(request.mode)
        if request.subtype == "set_max_thinking_tokens":
            await self.body.set_max_thinking_tokens(request.max_thinking_tokens)
            return {"max_thinking_tokens": request.max_thinking_tokens}
        if request.subtype == "interrupt":
            running = await self.interrupt()
            return {"interrupted": running, "queued": self._turns.qsize()}
        if request.subtype == "mcp_status":
            return await self.body.mcp_status()
        if request.subtype == "steer":
            return {"how": await self.steer(request.text)}
        raise SessionError("invalid_request", f"{request.subtype!r} is not a control")

    async def _set_mode(self, mode: str) -> JsonDict:
        """Without a policy gate the body takes ``mode`` as is; with one, the gate takes
        the Chorus mode and the CLI only switches between ``default`` and ``plan``."""
        gate = self.gate
        if gate is None:
            await self.body.set_permission_mode(mode)
            return {"mode": mode}
        chosen = checked_mode(mode)
        assert chosen is not None
        gate.mode = chosen
        if self.body.permission_mode != gate.native_mode:
            await self.body.set_permission_mode(gate.native_mode)
        return {"mode": chosen}

    @property
    def permission_mode(self) -> str:
        """The session's Chorus permission mode (the gate's, when there is one)."""
        gate = self.gate
        return gate.mode if gate is not None else self.body.permission_mode

    async def warn(self, control: str, message: str) -> None:
        """Append a :class:`CompatibilityWarning` (an unsupported control is never silent)."""
        await self._append(CompatibilityWarning(control=control, message=message))

    async def status(self) -> JsonDict:
        """What a brain needs to know about the session right now."""
        body = self._body
        return {
            "session_id": self.id,
            "body": self.body_name,
            "state": _public_state(self.state),
            "lifecycle": str(self.state),
            "model": body.model if body else None,
            "permission_mode": self.permission_mode if body else None,
            "native_session_id": body.native_session_id if body else None,
            "pid": getattr(body, "pid", None),
            "cwd": self.cwd,
            "queued": self._turns.qsize(),
            "last_seq": await self._store.last_seq(self.id),
            "connections": self.connections,
            "capabilities": body.capabilities.as_dict() if body else {},
            "ucp_version": UCP_VERSION,
        }

    def _check_live(self) -> None:
        if self.ended:
            raise SessionError(
                "session_ended",
                f"session {self.id} has ended; initialize with resume to restart it",
            )


def native_ids(record: SessionRecord) -> dict[str, str]:
    """The native session id of every body that served ``record``."""
    ids = record.transport.get("native_ids")
    out = dict(ids) if isinstance(ids, dict) else {}
    if record.native_session_id and record.body not in out:
        out[record.body] = record.native_session_id
    return out


def _public_state(state: State) -> str:
    """``idle``, ``running`` or ``ended``, as UCP ``status`` has always said."""
    if state in (State.RUNNING, State.INTERRUPTING):
        return "running"
    return "ended" if state is State.ENDED else "idle"


#: How long a crashed body may take to report its end.
_END_GRACE = 5.0


#: The ``terminal_reason`` of a body's end the turn goes on after (a denial's or a
#: steer's follow-up): a brain does not take it for the turn's end.
CONTINUES = "continues"


#: The end of a turn interrupted before it reached its body.
_NOT_STARTED = TurnFailed(
    error=ErrorInfo(code=ErrorCode.INTERRUPTED, message="interrupted before the turn started")
)


def _inner_end_marked(event: TurnCompleted | TurnFailed, body: Body) -> Event:
    if not body.continues_after(event):
        return event
    return event.model_copy(update={"terminal_reason": CONTINUES})


def _ends(event: Event, body: Body) -> bool:
    """``event`` ends the running turn (not an inner end a follow-up continues)."""
    return isinstance(event, TERMINAL_TYPES) and not body.continues_after(event)


def _crashed(final: Event) -> bool:
    return isinstance(final, TurnFailed) and final.error.code == ErrorCode.BODY_CRASHED


def _resolve(turn: Turn, final: Event) -> None:
    if not turn.done.done():
        turn.done.set_result(final)


@contextlib.asynccontextmanager
async def _closing(events: AsyncIterator[Event]) -> AsyncIterator[AsyncIterator[Event]]:
    """Close an event generator on exit, so none is left suspended for the GC to finish."""
    try:
        yield events
    finally:
        aclose = getattr(events, "aclose", None)
        if aclose is not None:
            await aclose()


async def _next(stream: AsyncIterator[Event]) -> Event:
    return await anext(stream)


async def _settle(task: asyncio.Future[T]) -> T | None:
    """The task's result if it finished, else cancel it and return None.

    A cancelled ``Queue.get`` leaves its item in the queue, so nothing is lost.
    """
    if not task.done():
        task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    if task.cancelled():
        return None
    return task.result()


def _applies(support: Support, body: Body) -> bool:
    """Whether the live ``body`` takes a control for the next turn: natively, or, for
    a one-shot body, on the command line of its next run (no restart: the same codec
    sees the whole session, so replay matches after a model switch)."""
    return support == Support.NATIVE or (support == Support.EMULATED and not body.long_lived)
