"""The dashboard's listener: a uvicorn server on ``[dashboard] host:port`` inside
the daemon's event loop (loopback only unless ``allow_remote``). A busy port
leaves the dashboard off; the daemon goes on. The address is written
to ``CHORUS_HOME/run/dashboard.json`` while it listens. Why it does not listen (a
busy port: "address already in use: port N; ...") is logged, answered to
``chorus dashboard`` and shown by ``chorus status`` (``dashboard`` in its JSON).

Connections are admitted as on the gateway's listener (the same guarded protocol):
at most ``max_connections`` open (``max_connections_per_peer`` from one address),
a connection over a cap is closed at accept, and one that has not sent its whole
request head within ``header_timeout_s`` is closed. Idle connections cannot take
the daemon's file descriptors, so its unix API keeps answering."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import ipaddress
import json
import logging
import socket
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import uvicorn
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from chorus.config import DashboardConfig, run_dir
from chorus.dashboard._app import Dashboard, build_dashboard_app
from chorus.flags import FlagDesk
from chorus.gateway import ConnectionCaps, guarded_protocol

if TYPE_CHECKING:
    from chorus.jobs import JobPort
    from chorus.routines import Scheduler

log = logging.getLogger("chorus.dashboard")
#: The dashboard of this process, for the daemon's ``/dashboard/login`` route.
_CURRENT: list[Dashboard] = []
#: Why this process serves no dashboard (a busy port ...), for the same route.
_PROBLEM: list[str] = []


def address_path() -> Path:
    """``CHORUS_HOME/run/dashboard.json``: ``{"host", "port", "url"}`` while serving."""
    return run_dir() / "dashboard.json"


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class _EmbeddedServer(uvicorn.Server):
    """A uvicorn server that leaves signals to the daemon."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def bind_problem(exc: OSError, host: str, port: int) -> str:
    """Why the dashboard could not listen, in words that say what to do."""
    if exc.errno == errno.EADDRINUSE:
        return (
            f"address already in use: port {port}; set [dashboard] port or stop the other process"
        )
    if exc.errno == errno.EACCES:
        return f"permission denied to listen on port {port}; set [dashboard] port above 1023"
    return f"cannot listen on {host}:{port}: {exc.strerror or exc}"


def _bind(config: DashboardConfig) -> socket.socket | str:
    """The listening socket, or why there is none."""
    if not is_loopback(config.host) and not config.allow_remote:
        return f"host {config.host} is not loopback; set [dashboard] allow_remote to serve it"
    family = socket.AF_INET6 if ":" in config.host else socket.AF_INET
    try:
        sock = socket.create_server((config.host, config.port), family=family, backlog=64)
    except OSError as exc:
        return bind_problem(exc, config.host, config.port)
    sock.setblocking(False)
    return sock


@contextlib.asynccontextmanager
async def dashboard_running(
    sup: JobPort, desk: FlagDesk | None, sched: Scheduler | None = None
) -> AsyncIterator[Dashboard | None]:
    """Serve the dashboard for the block's life (None: off, by ``port = 0`` or error;
    the error is logged, told by ``chorus dashboard`` and shown by ``status``)."""
    config = sup.config.dashboard
    sock = _bind(config) if config.port else "off: [dashboard] port = 0"
    if isinstance(sock, str):
        if config.port:
            log.error("dashboard off: %s", sock)
        _PROBLEM[:] = [sock]
        sup.status_hooks.append(lambda: {"dashboard": {"url": None, "problem": _PROBLEM[-1]}})
        yield None
        return
    host, port = sock.getsockname()[:2]
    dash = Dashboard(sup, desk, sched, ping_s=config.stream_ping_s, rotate_s=config.stream_rotate_s)
    dash.allow_address(str(host), int(port))
    server = _EmbeddedServer(_uvicorn_config(build_dashboard_app(dash), config))
    task = asyncio.create_task(server.serve(sockets=[sock]), name="dashboard")
    _CURRENT.append(dash)
    _PROBLEM.clear()
    url = f"http://{host}:{port}/"
    sup.status_hooks.append(lambda: {"dashboard": {"url": url, "problem": None}})
    path = address_path()
    path.write_text(json.dumps({"host": host, "port": port, "url": url}))
    try:
        yield dash
    finally:
        _CURRENT.remove(dash)
        path.unlink(missing_ok=True)
        server.should_exit = True
        await task
        sock.close()


def _uvicorn_config(app: object, config: DashboardConfig) -> uvicorn.Config:
    caps = ConnectionCaps(config.max_connections, config.max_connections_per_peer, name="dashboard")
    return uvicorn.Config(
        app,  # type: ignore[arg-type]
        http=guarded_protocol(caps, config.header_timeout_s),
        limit_concurrency=config.max_connections,
        lifespan="off",
        log_config=None,
        log_level="warning",
        proxy_headers=False,
        server_header=False,
        timeout_graceful_shutdown=2,
    )


def login_routes() -> list[Route]:
    """The daemon's ``POST /dashboard/login`` (unix socket): a one-time login URL."""

    async def login(request: Request) -> Response:
        if not _CURRENT:
            why = _PROBLEM[-1] if _PROBLEM else "off"
            msg = f"the dashboard is off: {why} (then `chorus stop` and `chorus start`)"
            if why.startswith("off"):
                msg = "the dashboard is off: set [dashboard] port (0 turns it off) and restart"
            return JSONResponse({"error": msg, "code": "dashboard_off"}, status_code=409)
        dash = _CURRENT[-1]
        token = dash.auth.new_login()
        base = sorted(dash.origins)[0]
        return JSONResponse({"url": f"{base}/login?token={token}", "base": base})

    return [Route("/dashboard/login", login, methods=["POST"])]
