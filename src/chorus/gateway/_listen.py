"""The gateway's TCP listener: a second uvicorn server inside the daemon's event loop.

It serves a small app (``/ucp`` and ``/metrics``, token required) on
``gateway.host:gateway.port``, loopback by default. The daemon's own uvicorn
server keeps the signal handlers; this one never installs any, and stops
when :meth:`TcpListener.stop` is called. Its address is written to
``CHORUS_HOME/run/gateway.json`` while it listens (useful with ``port = 0``).
"""

from __future__ import annotations

import contextlib
import json
import socket
from collections.abc import Iterator
from pathlib import Path

import uvicorn
from starlette.applications import Starlette
from starlette.routing import BaseRoute

from chorus.config import run_dir
from chorus.gateway._accept import ConnectionCaps, guarded_protocol
from chorus.gateway._config import GatewayConfig
from chorus.gateway._errors import GatewayError

#: How long open connections get to finish when the listener stops.
_GRACEFUL_S = 5


def address_path() -> Path:
    """``CHORUS_HOME/run/gateway.json``: ``{"host", "port", "url"}`` of the TCP listener."""
    return run_dir() / "gateway.json"


class _EmbeddedServer(uvicorn.Server):
    """A uvicorn server that leaves signals to its host process."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class TcpListener:
    """Bind at construction (so the caller learns of a busy port at once); ``await
    serve()`` in a task; :meth:`stop` ends it. One use."""

    def __init__(self, routes: list[BaseRoute], config: GatewayConfig) -> None:
        self._socket = _bind(config.host, config.port)
        host, port = self._socket.getsockname()[:2]
        self.host, self.port = str(host), int(port)
        app = Starlette(routes=routes)
        self.caps = ConnectionCaps(config.max_connections, config.max_connections_per_peer)
        self._server = _EmbeddedServer(
            uvicorn.Config(
                app,
                http=guarded_protocol(self.caps, config.header_timeout_s),
                limit_concurrency=config.max_connections,
                lifespan="off",
                log_config=None,  # the host process owns logging configuration
                log_level="warning",
                proxy_headers=False,  # nothing proxies us; X-Forwarded-For would be a lie
                server_header=False,
                ws_max_size=config.max_message_bytes,
                ws_ping_interval=config.ping_interval_s,
                ws_ping_timeout=config.ping_timeout_s,
                timeout_graceful_shutdown=_GRACEFUL_S,
            )
        )

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"ws://{host}:{self.port}/ucp"

    async def serve(self) -> None:
        """Listen until :meth:`stop`; the address file exists meanwhile."""
        path = address_path()
        path.write_text(json.dumps({"host": self.host, "port": self.port, "url": self.url}))
        try:
            await self._server.serve(sockets=[self._socket])
        finally:
            path.unlink(missing_ok=True)
            self._socket.close()

    def stop(self) -> None:
        self._server.should_exit = True


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        sock = socket.create_server((host, port), family=family, backlog=128)
    except OSError as exc:
        raise GatewayError(f"cannot listen on {host}:{port}: {exc}") from exc
    sock.setblocking(False)
    return sock
