"""The daemon process: one ASGI app on a 0600 unix socket, one per CHORUS_HOME."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import socket
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.routing import BaseRoute

from chorus._errors import ConfigError
from chorus.bodies import kill_detached_left, kill_live_groups
from chorus.client._checks import load_checked_config
from chorus.client._lifecycle import FACTS, READY, SPAWNED_ENV, WARM_UP_ENV, acquire_lock
from chorus.client._paths import log_path, pid_path, socket_path
from chorus.config import ChorusConfig, private_home, private_umask, tighten_home
from chorus.context import soul
from chorus.daemon._api import build_app
from chorus.daemon._budget import load_today
from chorus.daemon._cluster import RoutineLead
from chorus.daemon._flag_side import flag_desk, flags_running
from chorus.daemon._journal import journal
from chorus.daemon._logging import QuietLoopErrors, install_logging, raise_fd_limit
from chorus.daemon._metering import build_meter, meter_routes, metering
from chorus.daemon._metrics import DaemonMetrics, following
from chorus.daemon._outcomes import JobEnd, JobFailedOver, JobStarted
from chorus.daemon._reload import reload_routes
from chorus.daemon._supervisor import Supervisor, _notify, notify_desktop, notify_failover
from chorus.daemon._teams_api import team_routes
from chorus.daemon._tools import install_tools
from chorus.daemon._trim import IdleTrim, libc_trim
from chorus.daemon._warmup import first_job_warms_up, warm_up
from chorus.dashboard import login_routes
from chorus.flags import FlagDesk
from chorus.gateway import Gateway
from chorus.integrity import Guardian, Incident, guard_now, report
from chorus.mcpserver import channel_running, tool_routes
from chorus.memory import Extractions
from chorus.policy import AuditLog, SecretStore, load_policy
from chorus.routines import Scheduler, routine_routes
from chorus.session import make_hub, policy_guards
from chorus.store import Store, StoreUnreachableError, open_store, repair_store

log = logging.getLogger("chorus.daemon")
Lifespan = Callable[[Starlette], contextlib.AbstractAsyncContextManager[None]]


def _lifespan(
    store: Store,
    sup: Supervisor,
    gateway: Gateway,
    sched: Scheduler,
    extractions: Extractions,
    desk: FlagDesk,
    serving: asyncio.Event,
) -> Lifespan:
    """Run the sessions' MCP channel, the session hub, the supervisor, the routines'
    scheduler (once ``serving`` is set) and the gateway for the app's life; on the way
    out stop scheduling (routines first), then the gateway, then close every body, then
    the channel, await the memory extractions under way, close the store."""

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        meter = build_meter(sup)  # the model-API meter, on the channel's listener
        try:
            async with (
                channel_running(
                    sup.audit, sup.config.memory, meter_routes(meter), warm=False
                ) as channel,  # its MCP SDK loads at the first job (``_warmup``)
                metering(channel, meter),
                sup.hub.running(),
            ):
                task = asyncio.create_task(sup.run(), name="supervisor")
                routines = asyncio.create_task(_routines(store, sched, serving), name="routines")
                try:
                    metrics = DaemonMetrics(gateway.metrics.registry)
                    observers = (sup.ledger.observe, journal)
                    async with (
                        gateway.running(),
                        following(store, metrics, *observers),
                        flags_running(sup, desk, sched),  # flags, dashboard
                    ):
                        yield
                finally:
                    for owned in (routines, task):
                        owned.cancel()
                        with contextlib.suppress(asyncio.CancelledError):
                            await owned
        finally:
            await extractions.drain()  # extraction runs in the background
            await store.close()

    return lifespan


async def _routines(store: Store, sched: Scheduler, serving: asyncio.Event) -> None:
    """Run the routines' scheduler while this node leads them (on SQLite: always;
    on a shared store: one node of the cluster, by an advisory lock), from the moment
    the daemon serves: a start need not wait for it."""
    await serving.wait()
    lead = RoutineLead(store, sched.run, follow=sched.follow)
    sched.sup.status_hooks.append(lead.status)
    await lead.serve()


def _policy_parts(store: Store) -> dict[str, Any]:
    """The policy (policy.toml, made on first run), the audit chain and the secrets
    vault, all redacting with the store's redactor (which learns every secret)."""
    redactor = store.redactor
    secrets = SecretStore(redactor=redactor)
    secrets.register_with(redactor)
    for handler in logging.getLogger().handlers:
        handler.addFilter(redactor.logging_filter())
    return {
        "policy": load_policy(),
        "audit": AuditLog(redactor=redactor),
        "secrets": secrets,
    }


async def serve() -> int:
    """Run until SIGTERM/SIGINT. Returns the process exit code: 2 for a config or
    policy it refuses (said on stderr, nothing started)."""
    try:
        config = load_checked_config()
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 2
    lock = acquire_lock()
    if lock is None:
        print("chorus daemon: another daemon already runs for this CHORUS_HOME", file=sys.stderr)
        return 0
    ready = _output_to_log()
    warm = _warms_up()
    _private_process()
    # SOUL.md made first, so its default is baselined; the config and policy as
    # started (checked above, as `chorus start` always did before) are trusted.
    soul()
    incidents = Guardian().check(trusted=("config.toml", "policy.toml"))
    store = open_store(config)  # [store] url: SQLite in CHORUS_HOME or a shared PostgreSQL
    try:
        await store.start()
    except StoreUnreachableError as exc:
        print(f"chorus daemon: {exc}", file=sys.stderr)
        os.close(lock)
        return 2
    await repair_store(store)
    serving = asyncio.Event()
    app, gateway = await _app(store, config, incidents, serving)
    facts = lambda: {"tcp": gateway.tcp_url, "tcp_error": gateway.tcp_error}  # noqa: E731
    ready_line = _Ready(ready, facts, serving)
    await _serve_app(app, lock, ready_line, config if warm else None)
    return 0


def _output_to_log() -> int | None:
    """Started by ``spawn_daemon``: move stdout and stderr from the starter's pipe to
    ``run/daemon.log``; return the pipe, to say :data:`READY` on. None otherwise."""
    if os.environ.pop(SPAWNED_ENV, None) is None:
        return None
    sys.stdout.flush()
    sys.stderr.flush()
    pipe = os.dup(1)  # not inheritable: no body holds the starter's pipe open
    log = os.open(log_path(), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    for fd in (1, 2):
        os.dup2(log, fd)
    os.close(log)
    return pipe


def _warms_up() -> bool:
    """Whether to warm up once serving: not when started for a request on its way
    (``spawn_daemon(warm_up=False)``), which loads what it needs itself."""
    return os.environ.pop(WARM_UP_ENV, "1") != "0"


class _Ready:
    """The moment the daemon serves: what to say then on the starter's pipe (None when
    not started by ``spawn_daemon``): the facts ``chorus start`` prints, then
    :data:`READY`; and ``serving`` to set, which the work no request needs at once
    (the routines, the teams' drop folders) waits for."""

    def __init__(
        self, pipe: int | None, facts: Callable[[], dict[str, Any]], serving: asyncio.Event
    ) -> None:
        self._pipe = pipe
        self._facts = facts
        self._serving = serving

    def say(self) -> None:
        """Say it once and close the pipe (a starter that gave up waiting is fine)."""
        self._serving.set()
        if self._pipe is None:
            return
        line = FACTS + json.dumps(self._facts()).encode() + b"\n"
        with contextlib.suppress(OSError):
            os.write(self._pipe, line + READY)
        os.close(self._pipe)
        self._pipe = None


class _Server(uvicorn.Server):
    """uvicorn's server, which says on the starter's pipe when it serves, then warms
    up what the first job needs (``_warmup``), given the config to warm up for."""

    def __init__(self, config: uvicorn.Config, ready: _Ready, chorus: ChorusConfig | None) -> None:
        super().__init__(config)
        self._ready = ready
        self._chorus = chorus
        self._warming: asyncio.Task[None] | None = None

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if not self.started:
            return
        self._ready.say()
        if self._chorus is not None:
            self._warming = asyncio.create_task(warm_up(self._chorus), name="warm-up")


def _private_process() -> None:
    """The process's own set-up: a private home and umask, enough file descriptors,
    quiet loop errors."""
    private_home()
    private_umask()  # every file under CHORUS_HOME is 0600 (bodies keep the user's)
    tighten_home()
    raise_fd_limit()
    asyncio.get_running_loop().set_exception_handler(QuietLoopErrors())


async def _app(
    store: Store, config: ChorusConfig, incidents: list[Incident], serving: asyncio.Event
) -> tuple[Starlette, Gateway]:
    """Everything the daemon runs, wired into one app (with its gateway): the supervisor
    and its hub, the gateway, the routines' scheduler, memory extraction, flags and
    their routes."""
    install_tools()  # the features' tools on the MCP server
    parts = _policy_parts(store)
    guards = policy_guards(parts["policy"], parts["audit"], parts["secrets"])
    hub = make_hub(config, store, guards=guards)
    sup = Supervisor(store, config, hub=hub, **parts)
    await load_today(store, sup.ledger)  # [budget]: today's spend so far
    extractions = Extractions(store, config, hub.launcher.ask_once)  # memory at each job's end
    _hook(sup, config, extractions)
    gateway = Gateway(store, config, guards=guards, hub=hub)
    sched = Scheduler(sup)
    notify = _notify if config.daemon.notifications else None
    await report(incidents, parts["audit"], notify)
    sched.heartbeat_hooks.append(lambda: guard_now(parts["audit"], notify))
    desk = flag_desk(sup)
    lifespan = _lifespan(store, sup, gateway, sched, extractions, desk, serving)
    routes = _routes(sup, gateway, sched, serving)
    return build_app(sup, lifespan=lifespan, extra_routes=routes), gateway


def _hook(sup: Supervisor, config: ChorusConfig, extractions: Extractions) -> None:
    """What the supervisor tells others: status, outcomes, failovers, the first job's
    start (the warm-up of its MCP channel)."""
    sup.status_hooks.append(
        lambda: {"spend_today": sup.ledger.today(), "budget": sup.config.budget.model_dump()}
    )
    if config.daemon.notifications:
        sup.outcomes.subscribe(JobEnd, notify_desktop)
    if config.router.notify_on_failover:
        sup.outcomes.subscribe(JobFailedOver, notify_failover)
    sup.outcomes.subscribe(JobEnd, lambda end: extractions.hook(end.job, end.ended))
    sup.outcomes.subscribe(JobEnd, _trimming(sup))
    sup.outcomes.subscribe(JobStarted, first_job_warms_up(sup.audit))


def _trimming(sup: Supervisor) -> Callable[[JobEnd], Awaitable[None]]:
    """At each job's end, plan giving the allocator's free memory back once idle."""
    trim = IdleTrim(lambda: bool(sup.queue.busy()), libc_trim())

    async def noted(end: JobEnd) -> None:
        trim.note()

    return noted


def _routes(
    sup: Supervisor, gateway: Gateway, sched: Scheduler, serving: asyncio.Event
) -> list[BaseRoute]:
    """The routes beside the daemon's own API (the teams' watcher starts once
    ``serving`` is set)."""
    routes = [*gateway.routes(), *routine_routes(sched)]
    routes += tool_routes(sup.audit, sup.config.memory)  # a `chorus mcp` run by hand
    routes += team_routes(sup, serving)  # teams and their mailboxes
    routes += reload_routes(sup)  # chorus reload
    return routes + login_routes()  # chorus dashboard's one-time login URL


async def _serve_app(app: Starlette, lock: int, ready: _Ready, warm: ChorusConfig | None) -> None:
    """Serve ``app`` on the private socket until a signal (warming up for ``warm``
    once serving, if given); then clean up every body left, the socket, the pid file
    and the lock."""
    listener = _bind_private_socket()
    try:
        # uvicorn's own ``uds=`` would chmod the socket 0666; hand it our 0600 one.
        server = _Server(
            uvicorn.Config(
                app,
                fd=listener.fileno(),
                http="h11",  # the parser its tests ran with (httptools serves the meter only)
                log_level="warning",
                lifespan="on",
                # A streaming `chorus ask` must not hold the shutdown past
                # `chorus stop`'s patience (it SIGKILLs after 15 s, orphaning bodies).
                timeout_graceful_shutdown=3,
            ),
            ready,
            warm,
        )
        pid_path().write_text(str(os.getpid()))
        _keep_signals_for_cleanup()
        await server.serve()
    finally:
        kill_live_groups()  # whatever body a shutdown path did not close
        kill_detached_left()  # and detached ones not left running on purpose
        listener.close()
        socket_path().unlink(missing_ok=True)
        pid_path().unlink(missing_ok=True)
        os.close(lock)


def _keep_signals_for_cleanup() -> None:
    """uvicorn re-raises the SIGTERM/SIGINT it shut down for once ``serve()`` is done,
    under the handlers that were there before it: with the defaults that kills the
    process before the clean-up below (bodies' groups, socket, pid file) runs."""
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: None)


def _bind_private_socket() -> socket.socket:
    """A listening unix socket with mode 0600: its file mode is the authentication."""
    path = socket_path()
    path.unlink(missing_ok=True)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old_umask = os.umask(0o177)
    try:
        sock.bind(str(path))
    finally:
        os.umask(old_umask)
    os.chmod(path, 0o600)
    sock.listen(128)
    return sock


def main() -> None:
    install_logging()
    sys.exit(asyncio.run(serve()))
