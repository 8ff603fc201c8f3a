"""The session hub: which sessions are live, and the TaskGroup their drivers run in.

:meth:`SessionHub.open` starts a body for a new session, re-attaches to a live
one, or restarts a stored one with its CLI's native resume (``resume`` in
``initialize``). The hub closes sessions no connection used for
``session_idle_timeout_s``, and every session when it stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from chorus.bodies import (
    CLI_OF,
    Body,
    BodyOptions,
    PermissionCallback,
    allow_all,
    body_names,
    create_body,
)
from chorus.config import ChorusConfig
from chorus.gateway._config import GatewayConfig
from chorus.gateway._errors import GatewayCode, RequestError
from chorus.gateway._guard import PolicyGuards, native_mode
from chorus.gateway._sessions import GatewaySession
from chorus.policy import PolicyGate
from chorus.store import SessionRecord, Store

log = logging.getLogger("chorus.gateway")

BodyFactory = Callable[[str, BodyOptions], Body]
#: How long a closing session may take to record its last events.
_DRAIN_GRACE = 10.0


class SessionHub:
    """The live sessions, keyed by store session id. Owns their driver tasks.

    Run :meth:`run` in a task for the gateway's life: it holds the TaskGroup
    the drivers live in, closes sessions nobody used for
    ``session_idle_timeout_s``, and on cancellation closes every body (each
    gets ``_DRAIN_GRACE`` seconds to record its last events).
    """

    def __init__(
        self,
        store: Store,
        config: ChorusConfig,
        settings: GatewayConfig,
        *,
        body_factory: BodyFactory | None = None,
        permission_callback: PermissionCallback = allow_all,
        guards: PolicyGuards | None = None,
    ) -> None:
        self._store = store
        self._config = config
        self._settings = settings
        self._factory = body_factory or (lambda name, opts: create_body(name, opts, config))
        self._permission = permission_callback
        self._guards = guards
        self._live: dict[str, GatewaySession] = {}
        self._drivers: dict[str, asyncio.Task[None]] = {}
        # One lock for every resume: two brains resuming one stored session must not
        # start two bodies on it. Resumes are rare, so serializing them all is cheap.
        self._resume_lock = asyncio.Lock()
        self._starting = 0
        self._tg: asyncio.TaskGroup | None = None

    def __len__(self) -> int:
        return len(self._live)

    def get(self, session_id: str) -> GatewaySession | None:
        return self._live.get(session_id)

    def ids(self) -> list[str]:
        return sorted(self._live)

    # -- running ------------------------------------------------------------------------

    async def run(self) -> None:
        """Own the drivers until cancelled; then close every session (bounded)."""
        async with asyncio.TaskGroup() as tg:
            self._tg = tg
            try:
                await self._reap_forever()
            finally:
                self._tg = None
                await self._close_all()

    async def _reap_forever(self) -> None:
        timeout = self._settings.session_idle_timeout_s
        period = min(30.0, timeout / 4) if timeout else 3600.0
        while True:
            await asyncio.sleep(period)
            if timeout:
                await self._reap(timeout)

    async def _reap(self, idle_limit: float) -> None:
        now = time.monotonic()
        for session in list(self._live.values()):
            unused = session.connections == 0 and now - session.detached_at > idle_limit
            if unused and session.state == "idle":
                log.info("closing gateway session %s: unused for %.0f s", session.id, idle_limit)
                await session.close()

    async def _close_all(self) -> None:
        sessions = list(self._live.values())
        await asyncio.gather(*(s.close() for s in sessions), return_exceptions=True)
        drivers = list(self._drivers.values())
        if drivers:
            await asyncio.wait(drivers, timeout=_DRAIN_GRACE)

    # -- attaching ----------------------------------------------------------------------

    def attach(self, session: GatewaySession) -> None:
        session.connections += 1

    def detach(self, session: GatewaySession) -> None:
        session.connections = max(0, session.connections - 1)
        if session.connections == 0:
            session.detached_at = time.monotonic()

    # -- opening ------------------------------------------------------------------------

    async def open(
        self,
        *,
        body: str | None = None,
        model: str | None = None,
        cwd: str | None = None,
        permission_mode: str | None = None,
        resume: str | None = None,
    ) -> tuple[GatewaySession, bool]:
        """The session to attach to, and whether it existed before.

        With ``resume``: the live session (its model and mode stay as they are;
        change them with controls), else the stored one restarted with its
        CLI's native resume. Without: a new session on ``body`` (default from
        config) in ``cwd`` (default: the daemon's folder; must be absolute).

        Raises :class:`RequestError` (``unknown_body``, ``session_not_found``,
        ``too_many_sessions``, ``invalid_request``) or the body's start errors.
        Cancelling it closes whatever it started.
        """
        if resume is not None:
            return await self._resume(resume, body, model, permission_mode)
        name = body or self._settings.default_body
        if name not in body_names(self._config):
            known = ", ".join(body_names(self._config))
            raise RequestError(GatewayCode.UNKNOWN_BODY, f"unknown body {name!r}; known: {known}")
        folder = _checked_cwd(cwd)
        with self._reserve():
            record = await self._store.create_session(
                name, model=model, cwd=str(folder), state="starting", transport={"via": "gateway"}
            )
            session = await self._launch(record, model, permission_mode, resume=None)
        return session, False

    async def _resume(
        self, session_id: str, body: str | None, model: str | None, mode: str | None
    ) -> tuple[GatewaySession, bool]:
        async with self._resume_lock:
            live = self._live.get(session_id)
            if live is not None and not live.ended:
                _check_same_body(live.body_name, body)
                return live, True
            record = await self._store.get_session(session_id)
            _check_same_body(record.body, body)
            with self._reserve():
                session = await self._launch(
                    record, model or record.model, mode, resume=record.native_session_id
                )
            return session, True

    @contextlib.contextmanager
    def _reserve(self) -> Iterator[None]:
        """Count a session as live while its body starts, so concurrent opens respect
        ``max_sessions``."""
        if len(self._live) + self._starting >= self._settings.max_sessions:
            raise RequestError(
                GatewayCode.TOO_MANY_SESSIONS,
                f"the gateway runs {self._settings.max_sessions} sessions already",
            )
        self._starting += 1
        try:
            yield
        finally:
            self._starting -= 1

    async def _launch(
        self, record: SessionRecord, model: str | None, mode: str | None, *, resume: str | None
    ) -> GatewaySession:
        tg = self._tg
        if tg is None:
            raise RequestError(GatewayCode.INTERNAL, "the gateway is not running")
        gate = None
        if self._guards is not None:
            gate = self._guards.gate(session_id=record.id, cwd=record.cwd, mode=mode)
        body = self._factory(record.body, self._options(record, model, mode, resume, gate))
        try:
            await body.start()
        except BaseException:  # cancellation included: close what was started
            with contextlib.suppress(Exception):
                await body.close()
            with contextlib.suppress(Exception):
                await self._store.update_session(record.id, state="failed")
            raise
        session = GatewaySession(
            record, body, self._store, max_queued=self._settings.max_queued_messages, gate=gate
        )
        self._live[record.id] = session
        self._drivers[record.id] = tg.create_task(self._drive(session), name=f"ucp-{record.id}")
        pid = getattr(body, "pid", None)
        transport = {**record.transport, "pgid": pid} if isinstance(pid, int) else None
        await self._store.update_session(record.id, state="active", transport=transport)
        return session

    async def _drive(self, session: GatewaySession) -> None:
        try:
            await session.drive()
        finally:
            if self._live.get(session.id) is session:
                del self._live[session.id]
                self._drivers.pop(session.id, None)

    def _options(
        self,
        record: SessionRecord,
        model: str | None,
        mode: str | None,
        resume: str | None,
        gate: PolicyGate | None,
    ) -> BodyOptions:
        agent = self._config.agents.get(CLI_OF.get(record.body, record.body))
        env = dict(os.environ)
        if agent is not None:
            env.update(agent.env)
        if self._guards is not None:
            env.update(self._guards.env_for(record.body))
        return BodyOptions(
            cwd=Path(record.cwd or os.getcwd()),
            model=model,
            permission_mode=native_mode(gate) if gate is not None else mode or "default",
            resume=resume,
            env=env,
            permission_callback=gate if gate is not None else self._permission,
            raw_tap=self._store.raw_tap(record.id),
        )


def _check_same_body(actual: str, asked: str | None) -> None:
    if asked is not None and asked != actual:
        raise RequestError(
            GatewayCode.INVALID_REQUEST, f"the session runs body {actual!r}, not {asked!r}"
        )


def _checked_cwd(raw: str | None) -> Path:
    folder = Path(raw or os.getcwd()).expanduser()
    if not folder.is_absolute():
        raise RequestError(GatewayCode.INVALID_REQUEST, f"cwd must be absolute, not {raw!r}")
    if not folder.is_dir():
        raise RequestError(GatewayCode.INVALID_REQUEST, f"cwd {folder} is not a directory")
    return folder.resolve()
