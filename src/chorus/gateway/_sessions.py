"""Long-lived gateway sessions: one body each, every event in the log.

A :class:`GatewaySession` owns one started :class:`chorus.bodies.Body`. Its
driver task (owned by the :class:`SessionHub`'s TaskGroup) is the only
consumer of the body's events: between turns it records whatever the body
emits (control echoes, a crash); when a user message is queued it runs one
turn and records every event up to the terminal one. Turns run one at a
time, in arrival order; at most ``max_queued_messages`` wait (a further one
is refused with ``queue_full``, never dropped silently).

Controls map to body methods through the body's declared
:class:`chorus.bodies.Capabilities`: a control it declares unsupported is
refused without calling the body (``unsupported``); anything the body itself
refuses maps through :func:`chorus.gateway._errors.code_for`.

Sessions outlive connections: a brain that reconnects re-attaches with
``initialize {resume: <session id>, last_seq: N}``. A session whose body ended
(or that no connection used for ``session_idle_timeout_s``) leaves the hub;
``initialize`` with ``resume`` then starts a new body with the CLI's native
resume, appending to the same log.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from typing import Literal, TypeVar

from chorus._errors import ChorusError
from chorus.bodies import Body
from chorus.events import (
    UCP_VERSION,
    CompatibilityWarning,
    Event,
    JsonDict,
    KnownRequest,
    Notice,
    Queued,
    SessionEnded,
)
from chorus.gateway._errors import GatewayCode, RequestError
from chorus.gateway._guard import chorus_mode, native_mode, origin_of
from chorus.policy import PolicyGate
from chorus.store import ORIGIN_CHORUS, SessionRecord, Store, StoreError

log = logging.getLogger("chorus.gateway")
T = TypeVar("T")

State = Literal["idle", "running", "ended"]

#: The capability (``Capabilities`` field) each body control needs.
CAPABILITY_OF: dict[str, str] = {
    "interrupt": "interrupt",
    "set_model": "set_model",
    "set_permission_mode": "set_permission_mode",
    "set_max_thinking_tokens": "max_thinking_tokens",
    "steer": "steer",
    "mcp_status": "mcp_status",
}


class GatewaySession:
    """One store session and the long-lived body that serves it.

    Create through :meth:`SessionHub.open` (which starts the body and the
    driver). Every method may be called from any connection's task.
    """

    def __init__(
        self,
        record: SessionRecord,
        body: Body,
        store: Store,
        *,
        max_queued: int,
        gate: PolicyGate | None = None,
    ) -> None:
        self.id = record.id
        self.body_name = record.body
        self.cwd = record.cwd
        self.body = body
        self.connections = 0
        self.detached_at = time.monotonic()
        self._store = store
        self._gate = gate
        self._native = record.native_session_id
        self._prompts: asyncio.Queue[str] = asyncio.Queue(max_queued)
        self._enqueue_lock = asyncio.Lock()
        self._state: State = "idle"

    @property
    def state(self) -> State:
        return self._state

    @property
    def ended(self) -> bool:
        return self._state == "ended"

    # -- the driver ------------------------------------------------------------------

    async def drive(self) -> None:
        """Run queued turns and record every event until the body ends.

        Returns after recording the body's :class:`SessionEnded` (call
        :meth:`close` to make that happen). Store failures are logged and end
        the session rather than the hub.
        """
        unrun = 0
        try:
            while not self.ended:
                prompt = await self._idle()
                if prompt is None:
                    break
                if self.ended:  # taken in the same instant the body ended
                    unrun = 1
                    break
                await self._turn(prompt)
        except Exception:  # the task boundary: one broken session must not end the others
            log.exception("gateway session %s failed", self.id)
            self._state = "ended"
            with contextlib.suppress(Exception):
                await self.body.close()
        finally:
            await self._drop_queued(unrun)

    async def _idle(self) -> str | None:
        """Record events that arrive between turns until a prompt is queued (returned)
        or the body ends (None)."""
        async with _closing(self.body.stream()) as stream:
            while not self.ended:
                next_prompt = asyncio.ensure_future(self._prompts.get())
                next_event = asyncio.ensure_future(_next(stream))
                try:
                    await asyncio.wait(
                        {next_prompt, next_event}, return_when=asyncio.FIRST_COMPLETED
                    )
                finally:
                    event = await _settle(next_event)
                    prompt = await _settle(next_prompt)
                if event is not None:
                    await self._record(event)
                if prompt is not None:
                    return prompt
                if event is None:  # cannot happen (one of the two finished); stay safe
                    return None
        return None

    async def _turn(self, prompt: str) -> None:
        self._state = "running"
        try:
            async with _closing(self.body.turn(prompt)) as events:
                async for event in events:
                    await self._record(event)
        except StoreError:
            raise
        except ChorusError as exc:  # the body refused the message; the session goes on
            notice = Notice(message=f"the body did not take the message: {exc}", kind="error")
            await self._store.append(self.id, notice, origin=ORIGIN_CHORUS)
        finally:
            if self._state == "running":
                self._state = "idle"

    async def _record(self, event: Event) -> None:
        if self._gate is not None:
            event = self._gate.observe(event)  # audit, and mark untrusted tool output
        await self._store.append(self.id, event, origin=origin_of(event))
        if isinstance(event, SessionEnded):
            self._state = "ended"
            await self._store.update_session(self.id, state="ended")
        native = self.body.native_session_id
        if native and native != self._native:
            self._native = native
            await self._store.update_session(self.id, native_session_id=native)

    async def _drop_queued(self, dropped: int) -> None:
        while not self._prompts.empty():
            self._prompts.get_nowait()
            dropped += 1
        if dropped:
            message = f"{dropped} queued message(s) dropped: the body ended"
            with contextlib.suppress(Exception):
                await self._store.append(
                    self.id, Notice(message=message, kind="error"), origin=ORIGIN_CHORUS
                )

    async def close(self) -> None:
        """Close the body (bounded by its own escalation); the driver then records the
        :class:`SessionEnded` and returns. Idempotent."""
        await self.body.close()

    # -- user messages ------------------------------------------------------------------

    async def enqueue(self, text: str) -> int:
        """Queue a user message for the next turn; returns its position (0: next).

        The message is in the log (a :class:`Queued` event) before it is queued.
        Raises :class:`RequestError` ``queue_full`` or ``session_ended``.
        """
        async with self._enqueue_lock:
            self._check_live()
            if self._prompts.full():
                raise RequestError(
                    GatewayCode.QUEUE_FULL,
                    f"{self._prompts.maxsize} messages are queued already; wait or interrupt",
                )
            position = self._prompts.qsize() + (1 if self._state == "running" else 0)
            await self._store.append(
                self.id, Queued(text=text, position=position), origin=ORIGIN_CHORUS
            )
            self._prompts.put_nowait(text)  # cannot overflow: only this locked path puts
            return position

    # -- controls -------------------------------------------------------------------------

    async def control(self, request: KnownRequest) -> JsonDict:
        """Run one control on the body and return the success payload.

        Raises :class:`RequestError` (``unsupported`` when the body's declared
        capabilities rule it out, ``session_ended``), or whatever the body
        raises (mapped to a code by the caller).
        """
        if request.subtype == "status":
            return await self.status()
        self._check_live()
        capability = CAPABILITY_OF.get(request.subtype)
        if capability is not None and not self.body.capabilities.supports(capability):
            raise RequestError(
                GatewayCode.UNSUPPORTED,
                f"body {self.body_name!r} does not support {request.subtype!r}",
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
            running = self._state == "running"
            await self.body.interrupt()
            return {"interrupted": running, "queued": self._prompts.qsize()}
        if request.subtype == "mcp_status":
            return await self.body.mcp_status()
        if request.subtype == "steer":
            await self.body.steer(request.text)
            return {}
        # initialize is the connection's business; anything else is not a body control.
        raise RequestError(GatewayCode.INVALID_REQUEST, f"{request.subtype!r} is not a control")

    async def _set_mode(self, mode: str) -> JsonDict:
        """Without a policy gate the body takes ``mode`` as is; with one, the gate takes
        the Chorus mode and the CLI only switches between ``default`` and ``plan``."""
        gate = self._gate
        if gate is None:
            await self.body.set_permission_mode(mode)
            return {"mode": mode}
        chosen = chorus_mode(mode)
        assert chosen is not None
        gate.mode = chosen
        native = native_mode(gate)
        if self.body.permission_mode != native:
            await self.body.set_permission_mode(native)
        return {"mode": chosen}

    @property
    def permission_mode(self) -> str:
        """The session's Chorus permission mode (the gate's, when there is one)."""
        return self._gate.mode if self._gate is not None else self.body.permission_mode

    async def warn(self, control: str, message: str) -> None:
        """Append a :class:`CompatibilityWarning` (an unsupported control is never silent)."""
        warning = CompatibilityWarning(control=control, message=message)
        await self._store.append(self.id, warning, origin=ORIGIN_CHORUS)

    async def status(self) -> JsonDict:
        """What a brain needs to know about the session right now."""
        return {
            "session_id": self.id,
            "body": self.body_name,
            "state": self._state,
            "model": self.body.model,
            "permission_mode": self.permission_mode,
            "native_session_id": self.body.native_session_id,
            "cwd": self.cwd,
            "queued": self._prompts.qsize(),
            "last_seq": await self._store.last_seq(self.id),
            "connections": self.connections,
            "capabilities": self.body.capabilities.as_dict(),
            "ucp_version": UCP_VERSION,
        }

    def _check_live(self) -> None:
        if self.ended:
            raise RequestError(
                GatewayCode.SESSION_ENDED,
                f"session {self.id} has ended; initialize with resume to restart it",
            )


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
