"""The channel's listener: a uvicorn server on loopback inside the daemon's event loop.

It listens on the same port from one daemon to the next (``CHORUS_HOME/run/
channel.port``), so a body left running across a restart keeps its URL; when that
port is taken, another one is used and said in the log. The daemon's own uvicorn
server keeps the signal handlers; this one installs none.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import uvicorn

from chorus.bodies import Channel, channel_key, close_channel, open_channel
from chorus.config import run_dir
from chorus.mcpserver._channel import ChannelApp, SessionRoute
from chorus.policy import AuditLog

log = logging.getLogger("chorus.mcpserver")

HOST = "127.0.0.1"


def channel_port_path() -> Path:
    """``CHORUS_HOME/run/channel.port``: the port the channel listens on, kept."""
    return run_dir() / "channel.port"


class _EmbeddedServer(uvicorn.Server):
    """A uvicorn server that leaves signals to the daemon."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


@contextlib.asynccontextmanager
async def channel_running(
    audit: AuditLog | None,
    memory_table: dict[str, Any] | None,
    routes: dict[str, SessionRoute] | None = None,
    *,
    warm: bool = True,
) -> AsyncIterator[Channel]:
    """Serve every session's channel for the block's life; bodies started meanwhile
    are given their session's URL (``chorus.bodies.channel_servers``). ``routes``:
    what else each session reaches under its token (``/s/<token>/<name>/...``).
    With ``warm`` the MCP SDK is imported in the background at once (the daemon
    instead does so when its first job starts: ``chorus.daemon._warmup``)."""
    sock = bind_channel()
    key = channel_key()
    app = ChannelApp(key, audit, memory_table, routes=dict(routes or {}))
    channel = Channel(HOST, int(sock.getsockname()[1]), key, app.answer)
    server = _EmbeddedServer(_config(app))
    task = asyncio.create_task(server.serve(sockets=[sock]), name="mcp-channel")
    warming = asyncio.create_task(app.warm(), name="mcp-import") if warm else None
    open_channel(channel)
    try:
        yield channel
    finally:
        close_channel(channel)
        server.should_exit = True
        await task
        await app.close()
        if warming is not None:
            warming.cancel()
        sock.close()


def bind_channel(path: Path | None = None) -> socket.socket:
    """A listening loopback socket on the kept port (a new one when it is taken, or
    the first time), whose port is then kept."""
    path = path or channel_port_path()
    wanted = _kept_port(path)
    try:
        sock = socket.create_server((HOST, wanted), backlog=128)
    except OSError as exc:
        log.warning(
            "MCP channel: port %s is taken (%s); listening on another one: bodies "
            "started before cannot reach Chorus's tools",
            wanted,
            exc,
        )
        sock = socket.create_server((HOST, 0), backlog=128)
    sock.setblocking(False)
    # Accepted connections inherit it: each streamed chunk leaves when written (asyncio
    # sets it only on sockets made with proto IPPROTO_TCP, which create_server's are not).
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    port = int(sock.getsockname()[1])
    if port != wanted:
        path.write_text(f"{port}\n")
    return sock


def channel_url_shape() -> str:
    """What a body's URL looks like (``chorus context show``): the kept port, the
    session's own token."""
    port = _kept_port(channel_port_path()) or "<port>"
    return f"http://{HOST}:{port}/s/<session token>/mcp"


def _kept_port(path: Path) -> int:
    try:
        port = int(path.read_text().strip())
    except (OSError, ValueError):
        return 0
    return port if 0 < port < 65536 else 0


def _config(app: ChannelApp) -> uvicorn.Config:
    return uvicorn.Config(
        app,
        http="h11",  # the parser its tests ran with (httptools serves the meter only)
        lifespan="off",
        ws="none",
        log_config=None,
        log_level="warning",
        proxy_headers=False,
        server_header=False,
        timeout_graceful_shutdown=2,
    )
