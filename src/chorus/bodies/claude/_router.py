"""Host -> CLI control requests matched to their responses by id, with deadlines.

The body registers a request id with :meth:`ControlRouter.expect` *before*
writing the request (so a fast answer cannot be missed), the reader task hands
every ``control_response`` to :meth:`ControlRouter.resolve`, and the caller
waits with :meth:`ControlRouter.wait`. When the process dies,
:meth:`ControlRouter.fail_all` wakes every waiter with the crash.
"""

from __future__ import annotations

import asyncio

from chorus._errors import BodyTimeoutError, UnsupportedControlError
from chorus.bodies.claude._errors import ControlRequestError
from chorus.events import ControlResponseEvent, ErrorCode, JsonDict


class ControlRouter:
    """Pending control requests of one CLI process. Not thread-safe (one event loop)."""

    def __init__(self, body: str) -> None:
        self._body = body
        self._pending: dict[str, asyncio.Future[ControlResponseEvent]] = {}
        self._failure: BaseException | None = None

    def expect(self, request_id: str) -> asyncio.Future[ControlResponseEvent]:
        """Register ``request_id``; the returned future gets its response.

        After :meth:`fail_all` the future is failed at once with the same error.
        """
        future: asyncio.Future[ControlResponseEvent] = asyncio.get_running_loop().create_future()
        if self._failure is not None:
            future.set_exception(self._failure)
        else:
            self._pending[request_id] = future
        return future

    def resolve(self, response: ControlResponseEvent) -> bool:
        """Deliver a response; False when nobody waits for it (late or unknown id)."""
        future = self._pending.pop(response.request_id, None)
        if future is None or future.done():
            return False
        future.set_result(response)
        return True

    def fail_all(self, error: BaseException) -> None:
        """Fail every pending and every future request with ``error`` (the process is gone)."""
        self._failure = error
        pending, self._pending = self._pending, {}
        for future in pending.values():
            if not future.done():
                future.set_exception(error)

    def forget(self, request_id: str) -> None:
        """Stop waiting for ``request_id`` (its caller gave up)."""
        future = self._pending.pop(request_id, None)
        if future is not None and not future.done():
            future.cancel()

    @property
    def pending(self) -> int:
        return len(self._pending)

    async def wait(
        self,
        request_id: str,
        future: asyncio.Future[ControlResponseEvent],
        subtype: str,
        timeout: float,  # noqa: ASYNC109 - a per-request deadline is the router's contract
    ) -> JsonDict:
        """The success payload of ``request_id``.

        Raises :class:`BodyTimeoutError` after ``timeout`` seconds,
        :class:`UnsupportedControlError` when the CLI does not know ``subtype``,
        :class:`ControlRequestError` for any other error answer, and the
        :meth:`fail_all` error when the process died.
        """
        try:
            response = await asyncio.wait_for(future, timeout)
        except TimeoutError:
            self.forget(request_id)
            raise BodyTimeoutError(
                f"{self._body}: no answer to {subtype} ({request_id}) within {timeout:g}s"
            ) from None
        if response.ok:
            return dict(response.payload)
        error = response.error
        message = error.message if error else "control request failed"
        if error is not None and error.code is ErrorCode.UNSUPPORTED:
            raise UnsupportedControlError(self._body, subtype, message)
        native = error.native if error and error.native else {}
        raise ControlRequestError(subtype, message, error_code=native.get("error_code"))
