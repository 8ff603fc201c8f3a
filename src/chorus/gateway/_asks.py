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
from chorus.permissions import PermissionAsk
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
        return await self._put(_request(flag))

    async def review(self, ask: PermissionAsk, expires: float) -> BrainAnswer | None:
        """Put a call the policy allowed to the brain (``review``), like :meth:`ask`."""
        return await self._put(_review(ask, f"r_{next(self._ids)}_{self._salt}", expires))

    async def _put(self, request: RequestBody) -> BrainAnswer | None:
        request_id = f"cu_{next(self._ids)}_{self._salt}"
        future: asyncio.Future[ControlResponse] = asyncio.get_running_loop().create_future()
        self._waiting[request_id] = future
        try:
            await self._send(ControlRequest(request_id=request_id, request=request))
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
        call_id=ask.get("call_id"),
    )
    return RequestBody.model_validate(typed.model_dump())


def _review(ask: PermissionAsk, review_id: str, expires: float) -> RequestBody:
    typed = CanUseToolRequest(
        tool_name=ask.tool,
        native_tool=ask.native_tool,
        input=dict(ask.input),
        flag_id=review_id,
        reason="the policy allows this call",
        default="deny",
        expires=expires,
        call_id=ask.call_id,
        review=True,
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
