"""Host -> agent requests matched to their answers by id: one router for every body.

Claude's control protocol, Codex's app-server JSON-RPC and ACP all do the same
thing: write a request carrying an id, wait (bounded) for the answer with that
id, and wake every waiter with the crash when the process dies. The router does
exactly that and nothing protocol-specific; each body turns an answer into its
own typed error (:class:`ControlRequestError`, :class:`CodexRequestError`,
:class:`AcpRpcError`).

Use :meth:`RequestRouter.call` (register, write, wait), or the three steps
:meth:`~RequestRouter.expect` (*before* writing, so a fast answer cannot be
missed), :meth:`~RequestRouter.wait`; the reader hands every answer to
:meth:`~RequestRouter.resolve`; when stdout ends the body calls
:meth:`~RequestRouter.fail_all`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

from chorus._errors import BodyTimeoutError

Answer = TypeVar("Answer")


class RequestRouter(Generic[Answer]):
    """Pending requests of one agent process. Not thread-safe (one event loop)."""

    def __init__(self, body: str) -> None:
        self._body = body
        self._pending: dict[Hashable, asyncio.Future[Answer]] = {}
        self._failure: BaseException | None = None

    @property
    def pending(self) -> int:
        return len(self._pending)

    @property
    def failed(self) -> bool:
        """True once :meth:`fail_all` ran (the process is gone)."""
        return self._failure is not None

    def expect(self, request_id: Hashable) -> asyncio.Future[Answer]:
        """Register ``request_id``; the returned future gets its answer.

        After :meth:`fail_all` the future is failed at once with the same error.
        """
        future: asyncio.Future[Answer] = asyncio.get_running_loop().create_future()
        if self._failure is not None:
            future.set_exception(self._failure)
            future.exception()  # retrieved here: nobody may await a request never sent
        else:
            self._pending[request_id] = future
        return future

    def resolve(self, request_id: Hashable, answer: Answer) -> bool:
        """Deliver an answer; False when nobody waits for it (late or unknown id)."""
        future = self._pending.pop(request_id, None)
        if future is None or future.done():
            return False
        future.set_result(answer)
        return True

    def fail_all(self, error: BaseException) -> None:
        """Fail every pending and every later request with ``error`` (the process is gone)."""
        self._failure = error
        pending, self._pending = self._pending, {}
        for future in pending.values():
            if not future.done():
                future.set_exception(error)

    def forget(self, request_id: Hashable) -> None:
        """Stop waiting for ``request_id`` (its caller gave up)."""
        future = self._pending.pop(request_id, None)
        if future is not None and not future.done():
            future.cancel()

    async def wait(
        self,
        request_id: Hashable,
        future: asyncio.Future[Answer],
        what: str,
        timeout: float,  # noqa: ASYNC109 - a per-request deadline is the router's contract
    ) -> Answer:
        """The answer to ``request_id``.

        Raises :class:`BodyTimeoutError` after ``timeout`` seconds (naming ``what``)
        and the :meth:`fail_all` error when the process died.
        """
        try:
            return await asyncio.wait_for(future, timeout)
        except TimeoutError:
            self.forget(request_id)
            raise BodyTimeoutError(
                f"{self._body}: no answer to {what} ({request_id}) within {timeout:g}s"
            ) from None

    async def call(
        self,
        request_id: Hashable,
        send: Callable[[], Awaitable[None]],
        what: str,
        timeout: float,  # noqa: ASYNC109 - forwarded to wait()
    ) -> Answer:
        """Register ``request_id``, run ``send`` (the write), then :meth:`wait`.

        A failing ``send`` unregisters the id and propagates its error.
        """
        future = self.expect(request_id)
        try:
            await send()
        except BaseException:
            self.forget(request_id)
            raise
        return await self.wait(request_id, future, what, timeout)
