"""The gateway: sessions, connections, the TCP listener and the brain link, together.

Lifecycle::

    gateway = Gateway(store, config)                  # cheap; starts nothing
    routes = gateway.routes()                         # mount on the daemon's unix socket app
    async with gateway.running():                     # TaskGroup: session hub, TCP, brain link
        ...                                           # serve until the host stops

Inside ``running()``: the :class:`SessionHub` owns every session's driver;
the TCP listener (unless ``gateway.tcp = false``) serves ``/ucp`` and
``/metrics`` with token auth; the brain link dials ``[brain] url`` when set.
Leaving ``running()`` hangs up the brain, stops the listener, then closes
every session (bodies get a bounded grace to record their last events).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any, Self

from starlette.routing import BaseRoute

from chorus._errors import ChorusError
from chorus.bodies import PermissionCallback, allow_all, body_names
from chorus.config import ChorusConfig
from chorus.events import UCP_VERSION, JsonDict
from chorus.gateway._channel import Channel
from chorus.gateway._config import GatewaySettings, gateway_token, load_gateway_settings
from chorus.gateway._connection import Services, UcpConnection
from chorus.gateway._guard import PolicyGuards
from chorus.gateway._listen import TcpListener
from chorus.gateway._metrics import GatewayMetrics
from chorus.gateway._outbound import BrainManager
from chorus.gateway._policy import ControlPolicy, Transport, allow_all_controls
from chorus.gateway._ws import local_routes, metrics_route, ucp_route
from chorus.session import BodyFactory, SessionHub, make_hub
from chorus.store import Store

log = logging.getLogger("chorus.gateway")


class Gateway:
    """UCP v1 for brains, over the daemon's store.

    ``settings`` default to ``[gateway]``/``[brain]`` of ``config.toml``;
    ``control_policy`` is asked about every request (default: allow); ``guards`` put
    each session's body under ``policy.toml`` like the daemon's jobs (see
    :mod:`chorus.gateway._guard`); without them ``permission_callback``
    answers the bodies' tool permission asks (default: allow);
    ``body_factory`` builds bodies (default: :func:`chorus.bodies.create_body`).
    """

    def __init__(
        self,
        store: Store,
        config: ChorusConfig,
        settings: GatewaySettings | None = None,
        *,
        control_policy: ControlPolicy = allow_all_controls,
        permission_callback: PermissionCallback = allow_all,
        body_factory: BodyFactory | None = None,
        guards: PolicyGuards | None = None,
        hub: SessionHub | None = None,
    ) -> None:
        self.store = store
        self.config = config
        self.settings = settings or load_gateway_settings()
        self.metrics = GatewayMetrics()
        self._own_hub = hub is None
        self.hub = self._make_hub(body_factory, permission_callback, guards) if hub is None else hub
        self.brain = BrainManager(
            self.settings.brain,
            self._serve_brain,
            self.metrics,
            max_message_bytes=self.settings.gateway.max_message_bytes,
        )
        self._services = Services(
            store=store,
            hub=self.hub,
            settings=self.settings.gateway,
            metrics=self.metrics,
            policy=control_policy,
            gateway_status=self.status,
        )
        self._connections = 0
        self._token: str | None = None
        self._tcp: TcpListener | None = None
        self._tcp_task: asyncio.Task[None] | None = None
        self._tcp_error: str | None = None
        self.metrics.add_gauge("sessions", "Live gateway sessions.", lambda: len(self.hub))
        self.metrics.add_gauge("connections", "Open UCP connections.", lambda: self._connections)

    def _make_hub(
        self,
        factory: BodyFactory | None,
        permission: PermissionCallback,
        guards: PolicyGuards | None,
    ) -> SessionHub:
        """A hub of the gateway's own (the daemon passes the one it shares instead),
        with the gateway's idle timeout."""
        idle = self.settings.gateway.session_idle_timeout_s
        return make_hub(
            self.config,
            self.store,
            guards=guards,
            factory=factory,
            permission=permission,
            settings=self.settings,
            idle_timeout_s=idle,
        )

    # -- mounting -------------------------------------------------------------------------

    def routes(self) -> list[BaseRoute]:
        """Routes for the daemon's unix-socket app: ``/ucp``, ``/metrics``,
        ``/gateway/status``, ``/gateway/brain`` (no token: the socket is 0600)."""
        return local_routes(self)

    def tcp_routes(self) -> list[BaseRoute]:
        """Routes of the TCP listener: ``/ucp`` and ``/metrics``, token required."""
        guarded = self.settings.gateway.metrics_require_token
        return [
            ucp_route(self, "tcp", self._required_token),
            metrics_route(self, self._current_token if guarded else _no_token),
        ]

    def _required_token(self) -> str:
        if self._token is None:  # routes are only served while running() set it
            raise RuntimeError("the gateway token is not loaded")
        return self._token

    def _current_token(self) -> str | None:
        return self._token

    @property
    def tcp_url(self) -> str | None:
        """``ws://host:port/ucp`` of the TCP listener while it runs."""
        return self._tcp.url if self._tcp is not None else None

    @property
    def tcp_error(self) -> str | None:
        """Why the TCP listener did not start (the unix socket still serves), if so."""
        return self._tcp_error

    # -- running ----------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[Self]:
        """Run the session hub, the TCP listener and the brain link for the block's life."""
        async with contextlib.AsyncExitStack() as stack, asyncio.TaskGroup() as tg:
            if self._own_hub:
                await stack.enter_async_context(self.hub.running())
            self._start_tcp(tg)
            self.brain.bind(tg)
            await self._dial_configured_brain()
            try:
                yield self
            finally:
                await self.brain.disconnect()
                self.brain.bind(None)
                await self._stop_tcp()

    def _start_tcp(self, tg: asyncio.TaskGroup) -> None:
        config = self.settings.gateway
        if not config.tcp:
            return
        try:
            self._token = gateway_token(config)
            self._tcp = TcpListener(self.tcp_routes(), config)
        except ChorusError as exc:  # the unix socket still works; say why TCP does not
            self._tcp_error = str(exc)
            log.error("gateway TCP listener not started: %s", exc)
            return
        self._tcp_task = tg.create_task(self._tcp.serve(), name="gateway-tcp")

    async def _stop_tcp(self) -> None:
        if self._tcp is None or self._tcp_task is None:
            return
        self._tcp.stop()
        await self._tcp_task
        self._tcp = self._tcp_task = None

    async def _dial_configured_brain(self) -> None:
        url = self.settings.brain.url
        if url is None:
            return
        try:
            await self.brain.connect(url)
        except ChorusError as exc:
            log.error("not dialing [brain] url: %s", exc)

    # -- connections --------------------------------------------------------------------------

    async def serve_channel(self, channel: Channel, *, transport: Transport) -> None:
        """Serve UCP v1 on ``channel`` until it closes."""
        self._connections += 1
        try:
            await UcpConnection(channel, self._services, transport=transport).serve()
        finally:
            self._connections -= 1

    async def _serve_brain(self, channel: Channel) -> None:
        self._connections += 1
        try:
            connection = UcpConnection(
                channel,
                self._services,
                transport="outbound",
                send_queue=self.settings.brain.buffer,
            )
            await connection.serve()
        finally:
            self._connections -= 1

    async def status(self) -> JsonDict:
        """Gateway-wide facts (the answer to ``status`` before ``initialize``)."""
        result: dict[str, Any] = {
            "ucp_version": UCP_VERSION,
            "sessions": self.hub.ids(),
            "connections": self._connections,
            "bodies": body_names(self.config),
            "tcp": self.tcp_url,
            "tcp_error": self.tcp_error,
            "brain": self.brain.status(),
        }
        return result


def _no_token() -> str | None:
    return None
