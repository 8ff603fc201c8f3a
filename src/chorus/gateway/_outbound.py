"""Outbound: Chorus dials a brain and serves UCP v1 on that link.

The brain runs a WebSocket server; Chorus connects to it (``chorus connect
--brain-url`` or ``[brain] url``) and then behaves exactly as it does for an
inbound connection: the brain sends ``initialize``, ``user`` and control
requests, Chorus answers and streams events.

URL rules (checked before any dial): ``wss://`` only, unless the daemon's
environment has ``CHORUS_ALLOW_INSECURE_BRAIN=1`` (then ``ws://`` too); when
``brain.url_allowlist`` is not empty, the URL must fully match one of its
regular expressions. Proxies from the environment are not used.

Reconnection: each outage allows ``max_attempts`` dials. The first dial after
a drop happens at once; after failed dial ``n`` the link waits
``min(backoff_max_s, backoff_base_s * 2**(n-1))``. A successful dial resets
the count. When the brain closes the link with 1000 (normal closure) the link
ends without redialing; any other end of the link is an outage. The heartbeat
is the WebSocket ping every ``ping_interval_s``: a pong later than
``ping_timeout_s`` drops the link (and the link redials).

Sessions are not tied to the link: after a redial the brain re-attaches with
``initialize {resume, last_seq}`` and gets the events it missed from the log.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import time
import urllib.parse
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, WebSocketException

from chorus.gateway._channel import CLOSE_NORMAL, Channel, ChannelClosed
from chorus.gateway._config import BrainConfig
from chorus.gateway._errors import BrainUrlError
from chorus.gateway._metrics import GatewayMetrics

log = logging.getLogger("chorus.gateway")

INSECURE_ENV = "CHORUS_ALLOW_INSECURE_BRAIN"

LinkState = Literal["connecting", "connected", "backoff", "failed", "closed", "stopped"]
#: Serves one connected link until it ends (the gateway's UCP connection).
ServeLink = Callable[[Channel], Awaitable[None]]


def check_brain_url(
    url: str, config: BrainConfig, *, environ: Mapping[str, str] = os.environ
) -> str:
    """Return ``url`` if Chorus may dial it; raise :class:`BrainUrlError` saying why not."""
    try:
        parts = urllib.parse.urlsplit(url)
        host = parts.hostname
    except ValueError as exc:
        raise BrainUrlError(f"malformed brain URL {url!r}: {exc}") from exc
    if parts.scheme not in ("wss", "ws") or not host:
        raise BrainUrlError(f"a brain URL must be wss://host/..., not {url!r}")
    if parts.scheme == "ws" and environ.get(INSECURE_ENV) != "1":
        raise BrainUrlError(
            f"refusing unencrypted {url!r}: use wss://, or set {INSECURE_ENV}=1 for the daemon"
        )
    patterns = config.url_allowlist
    if patterns and not any(re.fullmatch(p, url) for p in patterns):
        raise BrainUrlError(f"{url!r} matches no pattern in brain.url_allowlist")
    return url


def backoff_delay(failures: int, config: BrainConfig) -> float:
    """Seconds to wait after the ``failures``-th failed dial of an outage (from 1)."""
    return float(min(config.backoff_max_s, config.backoff_base_s * 2 ** (failures - 1)))


class WebsocketsChannel:
    """A :class:`Channel` over a ``websockets`` client connection."""

    def __init__(self, connection: ClientConnection, peer: str) -> None:
        self._conn = connection
        self._peer = peer

    @property
    def peer(self) -> str:
        return self._peer

    async def receive(self) -> str | bytes | None:
        try:
            return await self._conn.recv()
        except ConnectionClosed:
            return None

    async def send(self, text: str) -> None:
        try:
            await self._conn.send(text)
        except ConnectionClosed as exc:
            raise ChannelClosed(str(exc)) from exc

    async def close(self, code: int = CLOSE_NORMAL, reason: str = "") -> None:
        with contextlib.suppress(WebSocketException, OSError):
            await self._conn.close(code, reason[:120])


@dataclass(slots=True)
class LinkStatus:
    url: str
    state: LinkState = "connecting"
    dials: int = 0
    failures: int = 0
    connected_at: float | None = None
    last_error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "state": self.state,
            "dials": self.dials,
            "failures": self.failures,
            "connected_at": self.connected_at,
            "last_error": self.last_error,
        }


class BrainLink:
    """One brain URL: dial, serve, redial within bounds. ``await run()`` once."""

    def __init__(
        self,
        url: str,
        config: BrainConfig,
        serve: ServeLink,
        metrics: GatewayMetrics,
        *,
        max_message_bytes: int,
        environ: Mapping[str, str] = os.environ,
    ) -> None:
        self.status = LinkStatus(url)
        self._config = config
        self._serve = serve
        self._metrics = metrics
        self._max_size = max_message_bytes
        self._headers = _auth_headers(config, environ)

    async def run(self) -> None:
        """Dial and serve until the brain says goodbye, or an outage outlasts
        ``max_attempts`` dials (state ``failed``). Cancel to stop (state ``stopped``)."""
        try:
            await self._run()
        except asyncio.CancelledError:
            self.status.state = "stopped"
            raise

    async def _run(self) -> None:
        failures = 0
        while True:
            connection = await self._dial(redial=self.status.dials > 0)
            if connection is None:
                failures += 1
                self.status.failures += 1
                if failures >= self._config.max_attempts:
                    self.status.state = "failed"
                    log.error("brain %s unreachable after %d dials", self.status.url, failures)
                    return
                self.status.state = "backoff"
                await asyncio.sleep(backoff_delay(failures, self._config))
                continue
            failures = 0
            if await self._serve_connected(connection):
                self.status.state = "closed"
                return

    async def _dial(self, *, redial: bool) -> ClientConnection | None:
        self.status.state = "connecting"
        self.status.dials += 1
        if redial:
            self._metrics.reconnect_attempts_total.inc()
        try:
            return await connect(
                self.status.url,
                additional_headers=self._headers,
                open_timeout=self._config.connect_timeout_s,
                ping_interval=self._config.ping_interval_s,
                ping_timeout=self._config.ping_timeout_s,
                max_size=self._max_size,
                proxy=None,
            )
        except (OSError, TimeoutError, WebSocketException) as exc:
            self.status.last_error = f"{type(exc).__name__}: {exc}"
            log.warning("dial to brain %s failed: %s", self.status.url, self.status.last_error)
            return None

    async def _serve_connected(self, connection: ClientConnection) -> bool:
        """Serve one connection; True when the brain closed it normally (no redial)."""
        self.status.state = "connected"
        self.status.connected_at = time.time()
        log.info("connected to brain %s", self.status.url)
        channel = WebsocketsChannel(connection, self.status.url)
        try:
            await self._serve(channel)
        finally:
            await channel.close()
        protocol = connection.protocol
        received = protocol.close_rcvd
        said_goodbye = (
            bool(protocol.close_rcvd_then_sent)  # the brain closed first
            and received is not None
            and received.code == CLOSE_NORMAL
        )
        if not said_goodbye:
            self.status.last_error = f"link dropped (close code {connection.close_code})"
        return said_goodbye


def _auth_headers(config: BrainConfig, environ: Mapping[str, str]) -> dict[str, str]:
    if config.token_env is None:
        return {}
    token = environ.get(config.token_env)
    if not token:
        raise BrainUrlError(f"brain.token_env names {config.token_env!r}, which is not set")
    return {"Authorization": f"Bearer {token}"}


class BrainManager:
    """At most one brain link at a time, its task owned by the gateway's TaskGroup.

    :meth:`bind` must be called (by the running gateway) before :meth:`connect`.
    """

    def __init__(
        self,
        config: BrainConfig,
        serve: ServeLink,
        metrics: GatewayMetrics,
        *,
        max_message_bytes: int,
    ) -> None:
        self._config = config
        self._serve = serve
        self._metrics = metrics
        self._max_size = max_message_bytes
        self._tg: asyncio.TaskGroup | None = None
        self._link: BrainLink | None = None
        self._task: asyncio.Task[None] | None = None

    def bind(self, tg: asyncio.TaskGroup | None) -> None:
        self._tg = tg

    def status(self) -> dict[str, Any]:
        if self._link is None:
            return {"url": None, "state": "none"}
        return self._link.status.as_dict()

    async def connect(self, url: str) -> dict[str, Any]:
        """Start dialing ``url`` (replacing any current link); returns the link status.

        Raises :class:`BrainUrlError` for a refused URL (nothing is dialed then).
        """
        check_brain_url(url, self._config)
        if self._tg is None:
            raise BrainUrlError("the gateway is not running")
        await self.disconnect()
        link = BrainLink(
            url, self._config, self._serve, self._metrics, max_message_bytes=self._max_size
        )
        self._link = link
        self._task = self._tg.create_task(link.run(), name="brain-link")
        return link.status.as_dict()

    async def disconnect(self) -> dict[str, Any]:
        """Hang up the current link, if any (idempotent); returns the final status."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        return self.status()
