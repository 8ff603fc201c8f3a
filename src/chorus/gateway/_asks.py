"""Permission asks sent to a brain on its connection: ``can_use_tool`` control
requests from Chorus, each answered by one ``control_response`` from the brain.

The session layer decides what the answer may do (``brain.authority``); this
module only carries the question and the answer.
"""

from __future__ import annotations

import asyncio
import itertools
import secrets
from collections.abc import Awaitable, Callable

from chorus.events import (
    CanUseToolRequest,
    ControlRequest,
    ControlResponse,
    OutboundFrame,
    RequestBody,
    SuccessBody,
)
from chorus.policy import PendingFlag
from chorus.session import BrainAnswer


class BrainAsker:
    """Asks the brain at the other end of one connection."""

    def __init__(self, send: Callable[[OutboundFrame], Awaitable[None]]) -> None:
        self._send = send
        self._waiting: dict[str, asyncio.Future[ControlResponse]] = {}
        self._ids = itertools.count(1)
        self._salt = secrets.token_hex(4)

    async def ask(self, flag: PendingFlag) -> BrainAnswer | None:
        """Send ``flag`` as a ``can_use_tool`` request and wait for the answer (the
        caller bounds the wait); None for an error answer or a malformed one."""
        request_id = f"cu_{next(self._ids)}_{self._salt}"
        future: asyncio.Future[ControlResponse] = asyncio.get_running_loop().create_future()
        self._waiting[request_id] = future
        try:
            await self._send(ControlRequest(request_id=request_id, request=_request(flag)))
            return _decision(await future)
        finally:
            self._waiting.pop(request_id, None)

    def answer(self, frame: ControlResponse) -> bool:
        """Resolve the ask ``frame`` answers; False when it answers none of ours."""
        future = self._waiting.get(frame.response.request_id)
        if future is None or future.done():
            return False
        future.set_result(frame)
        return True


def _request(flag: PendingFlag) -> RequestBody:
    ask = flag.ask or {}
    typed = CanUseToolRequest(
        tool_name=flag.tool,
        native_tool=str(ask.get("native_tool", flag.tool)),
        input=dict(ask.get("input") or {}),
        flag_id=flag.id,
        reason=flag.reason,
        default=flag.default,
        expires=flag.expires,
    )
    return RequestBody.model_validate(typed.model_dump())


def _decision(frame: ControlResponse) -> BrainAnswer | None:
    body = frame.response
    if not isinstance(body, SuccessBody):
        return None
    behavior = body.response.get("behavior")
    message = body.response.get("message")
    if behavior not in ("allow", "deny"):
        return None
    return BrainAnswer(behavior, message if isinstance(message, str) else None)
