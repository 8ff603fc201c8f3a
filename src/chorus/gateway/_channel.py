"""A message channel: the one thing a UCP connection needs from its WebSocket.

Inbound connections (Starlette) and the outbound link to a brain (the
``websockets`` client) both adapt to :class:`Channel`, so the protocol code
is written once and knows nothing of either library.
"""

from __future__ import annotations

from typing import Protocol

from chorus.gateway._errors import GatewayError

#: Close codes the gateway uses (RFC 6455 section 7.4.1 and the private range).
CLOSE_NORMAL = 1000
CLOSE_GOING_AWAY = 1001
CLOSE_POLICY = 1008
CLOSE_TOO_BIG = 1009
CLOSE_IDLE = 4000
CLOSE_SLOW = 4001


class ChannelClosed(GatewayError):  # noqa: N818 - a state, not a failure of ours
    """The peer is gone; nothing more can be sent."""


class Channel(Protocol):
    """One WebSocket, whichever library runs it. Not safe for concurrent sends
    (a connection has one writer task) or concurrent receives (one reader)."""

    @property
    def peer(self) -> str:
        """Who is on the other side, for logs and the policy hook."""
        ...

    async def receive(self) -> str | bytes | None:
        """The next message; None once the peer closed or the link broke."""
        ...

    async def send(self, text: str) -> None:
        """Send one text message; raises :class:`ChannelClosed` when the peer is gone."""
        ...

    async def close(self, code: int = CLOSE_NORMAL, reason: str = "") -> None:
        """Close (idempotent; never raises)."""
        ...
