"""The Starlette side: the ``/ucp`` WebSocket endpoint, ``/metrics``, and the
daemon-local ``/gateway/*`` routes.

Handshake checks, before ``accept``:

* ``Origin``: a request that carries one (every browser does) is refused with
  403 unless the origin is listed in ``gateway.allowed_origins``;
* TCP only: ``Authorization: Bearer <token>`` must match the gateway token,
  else 401. On the daemon's unix socket the socket's file mode (0600) is the
  authentication, as for the rest of the daemon API.

The ``/gateway/brain`` routes (dial, hang up, status of the outbound brain
link) exist on the unix socket only: a remote brain must not be able to make
Chorus dial elsewhere.
"""

from __future__ import annotations

import contextlib
import hmac
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from chorus._errors import ChorusError
from chorus._json_input import BadJsonError, read_object
from chorus.gateway._channel import CLOSE_NORMAL, CLOSE_POLICY, ChannelClosed
from chorus.gateway._metrics import CONTENT_TYPE
from chorus.gateway._policy import Transport
from chorus.web import bad_request, error_response

if TYPE_CHECKING:
    from chorus.gateway._gateway import Gateway


class StarletteChannel:
    """A :class:`chorus.gateway._channel.Channel` over an accepted Starlette WebSocket."""

    def __init__(self, websocket: WebSocket) -> None:
        self._ws = websocket
        self._closed = False
        client = websocket.client
        self._peer = f"{client.host}:{client.port}" if client else "unix-socket"

    @property
    def peer(self) -> str:
        return self._peer

    async def receive(self) -> str | bytes | None:
        if self._closed:
            return None
        try:
            message = await self._ws.receive()
        except (RuntimeError, WebSocketDisconnect):
            message = {"type": "websocket.disconnect"}
        if message["type"] == "websocket.disconnect":
            self._closed = True
            return None
        text = message.get("text")
        if text is not None:
            return str(text)
        return bytes(message.get("bytes") or b"")

    async def send(self, text: str) -> None:
        if self._closed:
            raise ChannelClosed("the peer is gone")
        try:
            await self._ws.send_text(text)
        except (RuntimeError, WebSocketDisconnect, OSError) as exc:
            self._closed = True
            raise ChannelClosed(str(exc)) from exc

    async def close(self, code: int = CLOSE_NORMAL, reason: str = "") -> None:
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(RuntimeError, WebSocketDisconnect, OSError):
            await self._ws.close(code, reason[:120])  # a close reason must fit in 123 bytes


def handshake_refusal(
    headers: Any, *, token: str | None, allowed_origins: list[str]
) -> tuple[int, str] | None:
    """Why a WebSocket handshake is refused (HTTP status, message), or None to accept.

    ``token`` None means no token is required (the unix socket).
    """
    origin = headers.get("origin")
    if origin is not None and origin not in allowed_origins:
        return 403, f"origin {origin!r} is not allowed (gateway.allowed_origins)"
    if token is not None and not bearer_matches(headers.get("authorization"), token):
        return 401, "missing or wrong bearer token (see CHORUS_HOME/run/gateway.token)"
    return None


def bearer_matches(header: str | None, token: str) -> bool:
    """Constant-time check of an ``Authorization: Bearer <token>`` header."""
    # The scheme is case-insensitive (RFC 9110 section 11.1); the token is not.
    scheme, _, given = (header or "").strip().partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(given.strip().encode(), token.encode())


async def _refuse(websocket: WebSocket, status: int, message: str) -> None:
    try:
        await websocket.send_denial_response(PlainTextResponse(message, status_code=status))
    except RuntimeError:  # the server lacks the denial extension: a plain 403 then
        await websocket.close(CLOSE_POLICY, message[:120])


def ucp_route(gateway: Gateway, transport: Transport, token: Callable[[], str | None]) -> BaseRoute:
    """``/ucp``: accept after the handshake checks, then serve UCP until either side closes."""

    async def endpoint(websocket: WebSocket) -> None:
        refusal = handshake_refusal(
            websocket.headers,
            token=token(),
            allowed_origins=gateway.settings.gateway.allowed_origins,
        )
        if refusal is not None:
            await _refuse(websocket, *refusal)
            return
        await websocket.accept()
        await gateway.serve_channel(StarletteChannel(websocket), transport=transport)

    return WebSocketRoute("/ucp", endpoint)


def metrics_route(gateway: Gateway, token: Callable[[], str | None]) -> BaseRoute:
    """``/metrics`` in the Prometheus text format (token-checked when ``token()`` is set)."""

    async def endpoint(request: Request) -> Response:
        expected = token()
        if expected is not None and not bearer_matches(
            request.headers.get("authorization"), expected
        ):
            return PlainTextResponse("missing or wrong bearer token", status_code=401)
        return PlainTextResponse(gateway.metrics.render(), media_type=CONTENT_TYPE)

    return Route("/metrics", endpoint)


def local_routes(gateway: Gateway) -> list[BaseRoute]:
    """Routes for the daemon's unix socket: UCP, metrics, gateway status, the brain link."""

    async def status(request: Request) -> Response:
        return JSONResponse(await gateway.status())

    async def brain_status(request: Request) -> Response:
        return JSONResponse(gateway.brain.status())

    async def brain_connect(request: Request) -> Response:
        try:
            url = (await read_object(request, what="the brain request")).get("url")
        except BadJsonError as exc:
            return error_response(exc)
        if not isinstance(url, str):
            return bad_request("bad request: expected {'url': ...} ('url' must be a string)")
        return await _guarded(lambda: gateway.brain.connect(url))

    async def brain_disconnect(request: Request) -> Response:
        return await _guarded(gateway.brain.disconnect)

    return [
        ucp_route(gateway, "unix", _no_token),
        metrics_route(gateway, _no_token),
        Route("/gateway/status", status),
        Route("/gateway/brain", brain_status, methods=["GET"]),
        Route("/gateway/brain", brain_connect, methods=["POST"]),
        Route("/gateway/brain", brain_disconnect, methods=["DELETE"]),
    ]


def _no_token() -> str | None:
    return None  # the unix socket's file mode is the authentication


async def _guarded(action: Callable[[], Awaitable[dict[str, Any]]]) -> Response:
    """The action's answer, or its error by the one table of :mod:`chorus.web`."""
    try:
        return JSONResponse(await action())
    except ChorusError as exc:
        return error_response(exc)
