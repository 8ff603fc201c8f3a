"""Per-connection limits: a token-bucket rate limit and a cap on requests in flight.

Both are plain synchronous objects owned by one connection (one event loop),
so they need no locks; the clock is injectable for tests.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from chorus.gateway._errors import GatewayCode, RequestError

Clock = Callable[[], float]


class TokenBucket:
    """Allows ``rate`` events per second on average and bursts of up to ``burst``.

    :meth:`take` is O(1) and never waits: a caller over the limit is told so
    and decides what to do (the gateway answers ``rate_limited``).
    """

    def __init__(self, rate: float, burst: int, *, clock: Clock = time.monotonic) -> None:
        if rate <= 0 or burst < 1:
            raise ValueError("rate must be positive and burst at least 1")
        self.rate = rate
        self.burst = float(burst)
        self._clock = clock
        self._tokens = float(burst)
        self._stamp = clock()

    def take(self) -> bool:
        """Spend one token if there is one; True when the event is within the limit."""
        now = self._clock()
        self._tokens = min(self.burst, self._tokens + (now - self._stamp) * self.rate)
        self._stamp = now
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return True
        return False


class PendingRequests:
    """Request ids in flight on one connection: unique, at most ``limit`` at once."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError("limit must be at least 1")
        self.limit = limit
        self._ids: set[str] = set()

    def add(self, request_id: str) -> None:
        """Admit ``request_id``; raises :class:`RequestError` (``duplicate_request`` or
        ``too_many_pending``) and admits nothing otherwise. Pair with :meth:`discard`."""
        if request_id in self._ids:
            raise RequestError(
                GatewayCode.DUPLICATE_REQUEST, f"request {request_id!r} is already in flight"
            )
        if len(self._ids) >= self.limit:
            raise RequestError(
                GatewayCode.TOO_MANY_PENDING,
                f"{self.limit} requests are in flight on this connection; wait for answers",
            )
        self._ids.add(request_id)

    def discard(self, request_id: str) -> None:
        self._ids.discard(request_id)

    def __len__(self) -> int:
        return len(self._ids)
