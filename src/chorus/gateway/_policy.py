"""The policy hook: every control request and user message is offered to it first.

The policy layer proper (``chorus.policy``) is written separately; the gateway
only needs this one seam. A hook returns None to allow, or the reason for a
denial, which the brain receives as an ``error`` response with code
``policy_denied`` (a user message has no request id, so its denial is an
error response with an empty ``request_id``). A hook that raises denies too:
a broken policy must fail closed.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Literal

from chorus.events import JsonDict

Transport = Literal["unix", "tcp", "outbound"]


@dataclass(frozen=True, slots=True)
class ControlContext:
    """What is asked, by whom, of which session.

    ``subtype`` is the request's subtype, or ``"user"`` for a user message
    (``payload`` is then ``{"text": ...}``). ``session_id`` and ``body`` are
    None before ``initialize``; for ``initialize`` they name what is asked for.
    """

    subtype: str
    transport: Transport
    peer: str
    session_id: str | None = None
    body: str | None = None
    payload: JsonDict = field(default_factory=dict)


#: Returns None to allow, or a human-readable reason to deny.
ControlPolicy = Callable[[ControlContext], Awaitable[str | None]]


async def allow_all_controls(context: ControlContext) -> str | None:
    """The default hook: allow everything (the body's own permission callback still runs)."""
    return None
