"""The live bus: committed events fan out to in-process subscribers.

The writer thread calls :meth:`EventBus.publish` once per committed batch, after
the commit, so a subscriber never sees an event the log could still lose. Each
:class:`Subscription` lives on the event loop that created it; events reach it
with ``loop.call_soon_threadsafe``, in commit order.

Catch-up with no gap and no duplicate: a subscription attaches to the bus
*before* it reads the log. Anything committed before the attach is in the log
read; anything committed after is also delivered live. Live events are then
matched against the next expected ``seq``: older ones are dropped (already
read), a jump ahead sends the subscription back to the log to fill the hole.

Slow-subscriber policy: each subscription buffers at most ``max_queue`` live
events. While it is still reading the log, an overflow only discards the
buffer (the log has those events and the catch-up re-reads them). Once live,
an overflow drops the subscription: iteration raises :class:`SlowSubscriberError`
carrying the last delivered ``seq``; resubscribe with ``from_seq=last_seq + 1``
to continue with nothing lost. Memory per subscriber is thus bounded by
``max_queue`` events plus one catch-up page.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from types import TracebackType
from typing import Self

from chorus.events import Event
from chorus.store._errors import SlowSubscriberError, StoreClosedError

#: Default bound on live events buffered per subscriber.
DEFAULT_SUBSCRIBER_QUEUE = 4096
#: Events read from the log per catch-up query.
CATCH_UP_PAGE = 500

#: Reads committed events of one session: ``(session_id, from_seq, limit)``.
Fetch = Callable[[str, int, int], Awaitable[list[Event]]]


class EventBus:
    """Fan-out of committed events to subscriptions. :meth:`publish` is thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._subs: list[Subscription] = []
        self._closed = False

    def publish(self, events: Sequence[Event]) -> None:
        """Offer committed events (in commit order) to every subscription."""
        if not events:
            return
        with self._lock:
            subs = list(self._subs)
        for sub in subs:
            sub._offer(events)

    def attach(self, sub: Subscription) -> None:
        with self._lock:
            if self._closed:
                sub._end_threadsafe()
                return
            self._subs.append(sub)

    def detach(self, sub: Subscription) -> None:
        with self._lock:
            if sub in self._subs:
                self._subs.remove(sub)

    def close(self) -> None:
        """End every subscription (their iteration stops after buffered events)."""
        with self._lock:
            subs, self._subs, self._closed = self._subs, [], True
        for sub in subs:
            sub._end_threadsafe()


class Subscription:
    """An async iterator of one session's events (or of all sessions, live only).

    Create it through ``Store.subscribe``. With ``next_seq`` (one session) it
    yields events with ``seq`` = ``next_seq``, ``next_seq + 1``, ... with no gap
    and no duplicate, reading the log first and live events after. Iteration
    ends when the store closes; it raises :class:`SlowSubscriberError` when the
    subscriber falls behind (see the module docstring). Use ``async with`` or
    call :meth:`aclose` to detach.
    """

    def __init__(
        self,
        bus: EventBus,
        session_id: str | None,
        *,
        next_seq: int,
        fetch: Fetch | None,
        max_queue: int = DEFAULT_SUBSCRIBER_QUEUE,
    ) -> None:
        if max_queue < 1:
            raise ValueError("max_queue must be at least 1")
        self.session_id = session_id
        self.max_queue = max_queue
        self._bus = bus
        self._fetch = fetch
        self._loop = asyncio.get_running_loop()
        self._next_seq = next_seq
        self._live: deque[Event] = deque()
        self._from_log: deque[Event] = deque()
        self._catching_up = session_id is not None and fetch is not None
        self._lost = False
        self._ended = False
        self._error: SlowSubscriberError | None = None
        self._wake = asyncio.Event()
        bus.attach(self)

    def _start_at(self, next_seq: int) -> None:
        """Set the first seq to deliver; for the store, between attach and the first read."""
        self._next_seq = next_seq

    @property
    def caught_up(self) -> bool:
        """True once the log has been read up to the live stream (a gateway can
        tell its client that replay is over); may turn False again after a hole."""
        return not self._catching_up

    @property
    def last_seq(self) -> int:
        """The ``seq`` of the last event delivered (``from_seq - 1`` before any)."""
        return self._next_seq - 1

    # -- writer-thread side --------------------------------------------------------

    def _offer(self, events: Sequence[Event]) -> None:
        batch = [e for e in events if self.session_id in (None, e.session_id)]
        if batch:
            self._call_soon(self._receive, batch)

    def _end_threadsafe(self) -> None:
        self._call_soon(self._end, None)

    def _call_soon(self, fn: Callable[[list[Event] | None], None], arg: list[Event] | None) -> None:
        try:
            self._loop.call_soon_threadsafe(fn, arg)
        except RuntimeError:  # the subscriber's loop is closed: nobody is listening
            self._bus.detach(self)

    # -- loop side -------------------------------------------------------------

    def _receive(self, batch: list[Event] | None) -> None:
        if self._ended or self._error is not None or not batch:
            return
        self._live.extend(batch)
        if len(self._live) > self.max_queue:
            self._live.clear()
            if self._catching_up:
                self._lost = True  # the log has them; the catch-up reads them again
            else:
                self._error = SlowSubscriberError(self.session_id, self.last_seq, self.max_queue)
                self._bus.detach(self)
        self._wake.set()

    def _end(self, _: list[Event] | None = None) -> None:
        self._ended = True
        self._wake.set()

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> Event:
        while True:
            if self._from_log:
                return self._take(self._from_log.popleft())
            if self._error is not None:
                raise self._error
            if self._catching_up and not self._ended:
                await self._read_log_page()
                continue
            event = self._next_live()
            if event is not None:
                return event
            if self._catching_up and not self._ended:
                continue
            if self._ended:
                raise StopAsyncIteration
            self._wake.clear()
            await self._wake.wait()

    async def _read_log_page(self) -> None:
        assert self._fetch is not None
        assert self.session_id is not None
        try:
            page = await self._fetch(self.session_id, self._next_seq, CATCH_UP_PAGE)
        except StoreClosedError:
            self._end()  # the store closed under us: end like a live subscription does
            return
        if page:
            self._from_log.extend(page)
        elif self._lost:
            self._lost = False  # live events were discarded meanwhile: read again
        else:
            self._catching_up = False

    def _next_live(self) -> Event | None:
        while self._live:
            event = self._live.popleft()
            if self.session_id is None:
                return event
            if event.seq < self._next_seq:
                continue  # already delivered from the log
            if event.seq == self._next_seq:
                return self._take(event)
            if self._fetch is None:
                return self._take(event)
            # A hole: only possible after discarded live events. The log fills it.
            self._live.appendleft(event)
            self._catching_up = True
            return None
        return None

    def _take(self, event: Event) -> Event:
        if self.session_id is not None:
            self._next_seq = event.seq + 1
        return event

    async def aclose(self) -> None:
        """Detach from the bus. Idempotent; iteration then ends."""
        self._bus.detach(self)
        self._end()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
