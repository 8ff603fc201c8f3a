"""Admission on the gateway's TCP listener: caps on open connections (all peers, and
per peer) checked at accept, and a deadline for the request head.

A flood of half-open connections (a client that connects and never finishes its
request) must not take the daemon's file descriptors: a connection over a cap is
aborted at once, and one whose request head is not complete within
``header_timeout_s`` is closed. Both live in a subclass of uvicorn's h11 protocol,
the one class that sees each connection from accept on.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

from chorus.gateway._limits import TokenBucket

log = logging.getLogger("chorus.gateway")


class ConnectionCaps:
    """Open transports, per peer host. Closed ones are pruned at each admission, so no
    close hook is needed (a WebSocket upgrade swaps the protocol object)."""

    def __init__(self, total: int, per_peer: int, *, name: str = "gateway") -> None:
        self.total = total
        self.per_peer = per_peer
        self.name = name
        self._open: dict[str, set[asyncio.BaseTransport]] = defaultdict(set)
        self.refused = 0
        self._warn = TokenBucket(rate=0.2, burst=3)  # at most one warning every 5 s

    def admit(self, peer: str, transport: asyncio.BaseTransport) -> bool:
        """Count ``transport`` in, or return False (it must be closed) over a cap."""
        self._prune()
        why = None
        if len(self._open[peer]) >= self.per_peer:
            why = f"{peer} already has {self.per_peer} connections"
        elif self.open_count() >= self.total:
            why = f"{self.total} connections are open"
        if why is None:
            self._open[peer].add(transport)
            return True
        self.refused += 1
        if self._warn.take():
            log.warning(
                "%s: refusing TCP connections: %s (%d refused)", self.name, why, self.refused
            )
        return False

    def open_count(self) -> int:
        return sum(len(transports) for transports in self._open.values())

    def _prune(self) -> None:
        for peer in list(self._open):
            alive = {t for t in self._open[peer] if not t.is_closing()}
            if alive:
                self._open[peer] = alive
            else:
                del self._open[peer]


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol under :class:`ConnectionCaps` and a request-head deadline.
    Use :func:`guarded_protocol` to bind the caps and the deadline."""

    caps: ConnectionCaps
    header_timeout_s: float

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        peer = self.client[0] if self.client else "?"
        if not self.caps.admit(peer, transport):
            transport.abort()
            return
        loop = asyncio.get_running_loop()
        self._head_timer: asyncio.TimerHandle | None = loop.call_later(
            self.header_timeout_s, self._head_deadline
        )

    def _head_deadline(self) -> None:
        # Still this protocol (no WebSocket upgrade) and no request parsed: a slow head.
        if self.transport.get_protocol() is self and self.cycle is None:
            self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        timer = getattr(self, "_head_timer", None)
        if timer is not None:
            timer.cancel()
        super().connection_lost(exc)


def guarded_protocol(caps: ConnectionCaps, header_timeout_s: float) -> type[H11Protocol]:
    """A :class:`GuardedH11Protocol` subclass bound to ``caps`` and the deadline."""
    attrs: dict[str, Any] = {"caps": caps, "header_timeout_s": header_timeout_s}
    return type("BoundGuardedH11Protocol", (GuardedH11Protocol,), attrs)
