"""One UCP v1 connection: frames in; responses, events and keep-alives out.

The same code serves an inbound WebSocket (unix socket or TCP) and the
outbound link to a brain; it only sees a :class:`Channel`.

Contract, per inbound frame:

* a frame over ``max_frame_bytes``, not JSON, or not a UCP v1 frame gets an
  ``error`` response (``frame_too_large`` / ``invalid_json`` /
  ``invalid_request``, ``request_id`` read from the frame when possible,
  else ``""``) and the connection stays open; a message above
  ``max_message_bytes`` is refused by the WebSocket layer itself, which
  closes with 1009;
* every ``control_request`` gets exactly one ``control_response`` within its
  deadline (``control_deadline_s``, or ``initialize_deadline_s``): success,
  or error with a :class:`GatewayCode`. Unknown subtypes and controls the
  body cannot do are answered ``unsupported`` and leave a
  :class:`CompatibilityWarning` in the session's log;
* ``initialize`` attaches the connection to a session (a later one detaches
  it from the previous session first): after the success answer, the
  session's events follow from ``last_seq + 1`` (the log, then live);
* a ``user`` message is queued for the session's next turn; it is answered
  only when refused (error response with ``request_id: ""``);
* ``keep_alive`` only proves the client is alive; a ``control_response``
  from the brain is ignored (Chorus asks brains nothing in UCP v1).

Frames above the rate limit are answered ``rate_limited``; more than
``max_pending`` requests in flight, ``too_many_pending``.

Outbound flow control: one writer task drains a queue of ``send_queue``
frames; producers wait when it is full (back-pressure, nothing dropped).
Events come from a store subscription, so a client too slow for the live
stream is fed from the log instead, with no gap, no duplicate and bounded
memory. A send blocked for ``send_timeout_s`` closes the connection (4001);
a client silent for ``idle_timeout_s`` is closed too (4000).

Request ids are unique per session: a request is recorded in the store's
control table before it runs, with its response after. Repeating an id that
has an answer gets that answer again without running anything (a brain
that reconnects may retry safely); repeating one without an answer is
``duplicate_request``. ``status`` is read-only and not recorded.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from chorus.context import client_brief
from chorus.events import (
    ControlRequest,
    ControlResponse,
    EventFrame,
    JsonDict,
    KeepAlive,
    OutboundFrame,
    UserMessage,
    success,
)
from chorus.gateway._asks import BrainAsker
from chorus.gateway._channel import (
    CLOSE_GOING_AWAY,
    CLOSE_IDLE,
    CLOSE_NORMAL,
    CLOSE_SLOW,
    Channel,
    ChannelClosed,
)
from chorus.gateway._config import GatewayConfig
from chorus.gateway._errors import GatewayCode, RequestError, code_for
from chorus.gateway._frames import Rejected, decode_frame, encode_frame, known_request, user_text
from chorus.gateway._limits import PendingRequests, TokenBucket
from chorus.gateway._metrics import GatewayMetrics, subtype_label
from chorus.gateway._policy import ControlContext, ControlPolicy, Transport
from chorus.gateway._records import ControlRecords, error_reply, payload_of
from chorus.session import Session as GatewaySession
from chorus.session import SessionError, SessionHub
from chorus.store import SlowSubscriberError, Store

log = logging.getLogger("chorus.gateway")


@dataclass(frozen=True, slots=True)
class Services:
    """What every connection shares (built once by the gateway)."""

    store: Store
    hub: SessionHub
    settings: GatewayConfig
    metrics: GatewayMetrics
    policy: ControlPolicy
    #: The answer to ``status`` before ``initialize`` (gateway-wide facts).
    gateway_status: Callable[[], Awaitable[JsonDict]]


class _Stop(Exception):  # noqa: N818 - control flow inside the TaskGroup, never escapes
    def __init__(self, code: int, reason: str = "") -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason


class UcpConnection:
    """Serve UCP v1 on one channel. Create, then ``await serve()`` once."""

    def __init__(
        self,
        channel: Channel,
        services: Services,
        *,
        transport: Transport,
        send_queue: int | None = None,
    ) -> None:
        self._channel = channel
        self._svc = services
        self._cfg = services.settings
        self._transport = transport
        self._outbox: asyncio.Queue[str] = asyncio.Queue(send_queue or self._cfg.send_queue)
        self._pending = PendingRequests(self._cfg.max_pending)
        self._bucket = TokenBucket(self._cfg.rate_per_s, self._cfg.rate_burst)
        self._session: GatewaySession | None = None
        self._forwarder: asyncio.Task[None] | None = None
        self._tg: asyncio.TaskGroup | None = None
        self._last_inbound = time.monotonic()
        self._records = ControlRecords(services.store)
        self._asks = BrainAsker(self._send)
        self._takes_asks = False
        self._reviews = False

    @property
    def session(self) -> GatewaySession | None:
        return self._session

    # -- lifecycle ------------------------------------------------------------------------

    async def serve(self) -> None:
        """Serve until the peer closes, the client idles out, or a send stalls; then
        close the channel. In-flight requests are cancelled (recorded ``cancelled``)."""
        code, reason = CLOSE_NORMAL, ""
        try:
            async with asyncio.TaskGroup() as tg:
                self._tg = tg
                tg.create_task(self._write_loop(), name="ucp-writer")
                tg.create_task(self._keepalive_loop(), name="ucp-keepalive")
                await self._read_loop()
                raise _Stop(CLOSE_NORMAL)
        except* _Stop as stops:
            first = stops.exceptions[0]
            assert isinstance(first, _Stop)
            code, reason = first.code, first.reason
        except* Exception:  # a bug must close this connection, not the gateway
            log.exception("UCP connection from %s failed", self._channel.peer)
            code, reason = CLOSE_GOING_AWAY, "internal error"
        finally:
            self._detach()
            await self._channel.close(code, reason)

    async def _read_loop(self) -> None:
        while True:
            data = await self._channel.receive()
            if data is None:
                return
            self._last_inbound = time.monotonic()
            await self._on_message(data)

    async def _write_loop(self) -> None:
        while True:
            text = await self._outbox.get()
            try:
                async with asyncio.timeout(self._cfg.send_timeout_s):
                    await self._channel.send(text)
            except TimeoutError:
                raise _Stop(CLOSE_SLOW, "send stalled: the client does not read") from None
            except ChannelClosed:
                raise _Stop(CLOSE_NORMAL) from None

    async def _keepalive_loop(self) -> None:
        """Send ``keep_alive`` every ``keepalive_interval_s``; close an idle client."""
        interval, idle_limit = self._cfg.keepalive_interval_s, self._cfg.idle_timeout_s
        last_sent = time.monotonic()
        while True:
            await asyncio.sleep(min(interval, idle_limit / 4))
            now = time.monotonic()
            if now - self._last_inbound > idle_limit:
                raise _Stop(CLOSE_IDLE, f"nothing received for {idle_limit:g} s")
            if now - last_sent >= interval and not self._outbox.full():
                # A full outbox means frames are flowing; the peer knows we are alive.
                self._outbox.put_nowait(encode_frame(KeepAlive()))
                last_sent = now

    async def _send(self, frame: OutboundFrame) -> None:
        await self._outbox.put(encode_frame(frame))

    # -- inbound frames -----------------------------------------------------------------

    async def _on_message(self, data: str | bytes) -> None:
        frame = decode_frame(data, max_bytes=self._cfg.max_frame_bytes)
        # Every frame spends a token, malformed ones too: garbage cannot buy unlimited
        # error answers. A malformed frame over the limit is dropped unanswered.
        if not self._bucket.take():
            await self._rate_limited(frame)
            return
        if isinstance(frame, Rejected):
            await self._reject(frame)
            return
        if isinstance(frame, ControlRequest):
            await self._start_request(frame)
        elif isinstance(frame, UserMessage):
            await self._on_user(frame)
        elif isinstance(frame, ControlResponse) and not self._asks.answer(frame):
            log.debug("ignored control_response %s from a brain", frame.response.request_id)

    async def _reject(self, rejected: Rejected) -> None:
        self._svc.metrics.rejected_frames_total.inc(rejected.code)
        await self._send(rejected.response())

    async def _rate_limited(self, frame: object) -> None:
        message = f"over {self._cfg.rate_per_s:g} frames/s (burst {self._cfg.rate_burst})"
        if isinstance(frame, ControlRequest):
            await self._reject(Rejected(GatewayCode.RATE_LIMITED, message, frame.request_id))
        elif isinstance(frame, UserMessage):
            await self._reject(Rejected(GatewayCode.RATE_LIMITED, message))
        elif isinstance(frame, Rejected):
            self._svc.metrics.rejected_frames_total.inc(GatewayCode.RATE_LIMITED)
        # keep_alive and stray responses over the limit are dropped: nothing to answer.

    async def _on_user(self, frame: UserMessage) -> None:
        try:
            session = self._require_session()
            text = user_text(frame)
            await self._check_policy("user", {"text": text}, session)
            await session.enqueue(text)
        except RequestError as exc:
            await self._reject(Rejected(exc.code, exc.message))
        except SessionError as exc:
            await self._reject(Rejected(code_for(exc), exc.message))
        except Exception as exc:  # a store failure: tell the brain, keep serving
            log.exception("user message failed")
            await self._reject(Rejected(code_for(exc), f"message not queued: {exc}"))

    # -- control requests -------------------------------------------------------------------

    async def _start_request(self, frame: ControlRequest) -> None:
        try:
            self._pending.add(frame.request_id)
        except RequestError as exc:
            await self._reject(Rejected(exc.code, exc.message, frame.request_id))
            return
        assert self._tg is not None
        self._tg.create_task(self._serve_request(frame, time.monotonic()))

    async def _serve_request(self, frame: ControlRequest, received: float) -> None:
        subtype = frame.request.subtype
        body = self._session.body_name if self._session is not None else "none"
        self._svc.metrics.requests_total.inc(subtype_label(subtype), body)
        try:
            if subtype == "initialize":
                await self._serve_initialize(frame, received)
            else:
                await self._respond(frame, received, await self._answer(frame))
        finally:
            self._pending.discard(frame.request_id)

    async def _respond(
        self, frame: ControlRequest, received: float, reply: ControlResponse
    ) -> None:
        await self._send(reply)
        elapsed_ms = (time.monotonic() - received) * 1000
        label = subtype_label(frame.request.subtype)
        self._svc.metrics.control_response_latency_ms.observe(elapsed_ms, label)

    async def _answer(self, frame: ControlRequest) -> ControlResponse:
        """The one response to a session-level request (recorded when a session exists)."""
        session = self._session
        if session is None or frame.request.subtype == "status":
            return await self._run_within_deadline(frame, session)
        try:
            replay = await self._records.open(session, frame)
        except Exception as exc:  # nothing ran; say so rather than run it unrecorded
            log.exception("could not record request %s", frame.request_id)
            return error_reply(frame, GatewayCode.INTERNAL, f"could not record: {exc}")
        if replay is not None:
            return replay
        try:
            reply = await self._run_within_deadline(frame, session)
        except asyncio.CancelledError:
            gone = error_reply(frame, GatewayCode.CANCELLED, "the connection closed")
            await self._records.close(session, frame, gone)
            raise
        await self._records.close(session, frame, reply)
        return reply

    async def _run_within_deadline(
        self, frame: ControlRequest, session: GatewaySession | None
    ) -> ControlResponse:
        deadline = self._cfg.control_deadline_s
        try:
            async with asyncio.timeout(deadline):
                payload = await self._execute(frame, session)
            return success(frame.request_id, payload)
        except TimeoutError:
            message = f"no answer within {deadline:g} s"
            return await self._failed(frame, session, GatewayCode.TIMEOUT, message)
        except Exception as exc:  # every request gets its one answer, whatever broke
            return await self._failed(frame, session, code_for(exc), _message(exc))

    async def _execute(self, frame: ControlRequest, session: GatewaySession | None) -> JsonDict:
        known = known_request(frame)
        if known is None:
            raise RequestError(
                GatewayCode.UNSUPPORTED, f"unknown subtype {frame.request.subtype!r} in UCP v1"
            )
        if session is None and known.subtype != "status":
            raise RequestError(GatewayCode.NOT_INITIALIZED, "send initialize first")
        await self._check_policy(known.subtype, payload_of(frame), session)
        if session is None:
            return await self._svc.gateway_status()
        return await session.control(known)

    async def _failed(
        self, frame: ControlRequest, session: GatewaySession | None, code: GatewayCode, text: str
    ) -> ControlResponse:
        """Count and explain an error answer (unsupported ones also warn in the log)."""
        subtype = frame.request.subtype
        metrics = self._svc.metrics
        if code is GatewayCode.INTERNAL:
            log.error("request %s (%s) failed inside Chorus: %s", frame.request_id, subtype, text)
        if code is GatewayCode.POLICY_DENIED:
            metrics.policy_denials_total.inc(subtype_label(subtype))
        if code is GatewayCode.UNSUPPORTED:
            body = session.body_name if session is not None else "none"
            metrics.unsupported_subtype_total.inc(subtype_label(subtype), body)
            if session is not None:
                await self._warn(session, subtype, text)
        return error_reply(frame, code, text)

    async def _warn(self, session: GatewaySession, control: str, text: str) -> None:
        try:
            await session.warn(control, text)
        except Exception:  # the answer is the brain's signal; the log entry is best effort
            log.exception("could not log the compatibility warning for %s", control)

    async def _check_policy(
        self, subtype: str, payload: JsonDict, session: GatewaySession | None
    ) -> None:
        context = ControlContext(
            subtype=subtype,
            transport=self._transport,
            peer=self._channel.peer,
            session_id=session.id if session is not None else None,
            body=session.body_name if session is not None else None,
            payload=payload,
        )
        await self._apply_policy(context)

    async def _apply_policy(self, context: ControlContext) -> None:
        try:
            reason = await self._svc.policy(context)
        except Exception as exc:  # a broken policy fails closed
            reason = f"the policy hook failed: {exc!r}"
        if reason is not None:
            raise RequestError(GatewayCode.POLICY_DENIED, reason)

    def _require_session(self) -> GatewaySession:
        if self._session is None:
            raise RequestError(GatewayCode.NOT_INITIALIZED, "send initialize first")
        return self._session

    # -- initialize -------------------------------------------------------------------------

    async def _serve_initialize(self, frame: ControlRequest, received: float) -> None:
        """Open (or re-attach to) a session; after the answer is sent, stream its events
        from ``last_seq + 1``."""
        try:
            async with asyncio.timeout(self._cfg.initialize_deadline_s):
                session, payload = await self._initialize(frame)
        except TimeoutError:
            message = f"initialize took over {self._cfg.initialize_deadline_s:g} s"
            reply = await self._failed(frame, None, GatewayCode.TIMEOUT, message)
            await self._respond(frame, received, reply)
            return
        except Exception as exc:  # every request gets its one answer, whatever broke
            reply = await self._failed(frame, None, code_for(exc), _message(exc))
            await self._respond(frame, received, reply)
            return
        reply = success(frame.request_id, payload)
        await self._record_initialize(session, frame, reply)
        self._detach()  # nothing of a previous attachment may follow the answer
        await self._respond(frame, received, reply)
        self._attach(session, from_seq=int(payload["replay_from"]))

    async def _initialize(self, frame: ControlRequest) -> tuple[GatewaySession, JsonDict]:
        known = known_request(frame)
        assert known is not None
        assert known.subtype == "initialize"
        context = ControlContext(
            subtype="initialize",
            transport=self._transport,
            peer=self._channel.peer,
            session_id=known.resume,
            body=known.body,
            payload=payload_of(frame),
        )
        await self._apply_policy(context)
        if known.mcp_servers and self._transport != "unix":
            message = (
                "mcp_servers are taken only on the local socket: "
                "a remote brain cannot start programs here"
            )
            raise RequestError(GatewayCode.POLICY_DENIED, message)
        self._takes_asks = known.can_use_tool
        self._reviews = known.review_calls
        body = known.body if known.resume else (known.body or self._cfg.default_body)
        session, resumed = await self._svc.hub.open(
            body=body,
            model=known.model,
            cwd=known.cwd,
            permission_mode=known.permission_mode,
            resume=known.resume,
            transport={"via": "gateway"},
            # the client's system prompt and MCP servers for the body.
            brief=client_brief(known.system_prompt, known.append_system_prompt, known.mcp_servers),
        )
        return session, await self._initialize_payload(session, known.last_seq, resumed)

    async def _initialize_payload(
        self, session: GatewaySession, asked: int | None, resumed: bool
    ) -> JsonDict:
        """The session's status, plus where the event replay starts (``last_seq + 1``;
        from the first event when the brain gives no ``last_seq``)."""
        status = await session.status()
        last_seq = int(status["last_seq"])
        if asked is not None and not 0 <= asked <= last_seq:
            raise RequestError(
                GatewayCode.INVALID_REQUEST,
                f"last_seq {asked} is outside the log (0..{last_seq}) of session {session.id}",
            )
        return {**status, "resumed": resumed, "replay_from": (asked or 0) + 1}

    async def _record_initialize(
        self, session: GatewaySession, frame: ControlRequest, reply: ControlResponse
    ) -> None:
        """Log the initialize in the session it opened (a repeated id is not an error
        here: a reconnecting brain may well resend its initialize)."""
        try:
            first_time = await self._records.open(session, frame) is None
        except Exception:  # the session is open either way; the log entry is best effort
            log.exception("could not record initialize %s", frame.request_id)
            return
        if first_time:
            await self._records.close(session, frame, reply)

    def _attach(self, session: GatewaySession, *, from_seq: int) -> None:
        self._detach()
        self._session = session
        self._svc.hub.attach(session)
        if self._takes_asks:
            session.brains.add(self._asks.ask)
        if self._reviews:
            session.brains.add_reviewer(self._asks.review)
        assert self._tg is not None
        self._forwarder = self._tg.create_task(self._forward(session.id, from_seq))

    def _detach(self) -> None:
        if self._forwarder is not None:
            self._forwarder.cancel()
            self._forwarder = None
        if self._session is not None:
            self._session.brains.remove(self._asks.ask)
            self._session.brains.remove_reviewer(self._asks.review)
            self._svc.hub.detach(self._session)
            self._session = None

    async def _forward(self, session_id: str, from_seq: int) -> None:
        """Send the session's events from ``from_seq`` on: the log first, then live.

        A subscription dropped for falling behind resumes from the log at the next
        seq, so the client still sees every event once, in order.
        """
        next_seq = from_seq
        while True:
            subscription = await self._svc.store.subscribe(session_id, from_seq=next_seq)
            try:
                async with subscription:
                    async for event in subscription:
                        await self._send(EventFrame(seq=event.seq, event=event))
                        next_seq = event.seq + 1
                return  # the store closed
            except SlowSubscriberError as exc:
                next_seq = exc.last_seq + 1


def _message(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text if len(text) <= 2000 else text[:2000] + "..."
