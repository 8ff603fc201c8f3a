"""The hub of live sessions, shared by the daemon's supervisor and the gateway.

There is at most one live :class:`Session` (so one CLI process) per stored
session: a brain attached over UCP and a ``chorus ask --session S`` on the same
session share it, and their turns queue on it. The hub starts a body for a new
session, re-uses a live one, or restarts a stored one with its CLI's native
resume; it closes a session nobody used for ``idle_timeout_s`` (its next turn
resumes natively), and every session when it stops.

Opening and acquiring are serialized per stored session, so two callers racing
on one session never start two bodies.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import time
import weakref
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from chorus.bodies import Body, PermissionCallback, allow_all, body_class, body_names
from chorus.context import Brief
from chorus.policy import SENSITIVE_PATHS, PathContext, brain_cwd_problem
from chorus.session._brains import Authority
from chorus.session._errors import SessionError
from chorus.session._history import session_history
from chorus.session._launcher import BodyLauncher, Launch, checked_mode, native_mode
from chorus.session._reattach import Snapshot, counted, handed_out, keep_flag
from chorus.session._session import Session, Turn, native_ids
from chorus.session._spares import Spare, SpareKey, SparePool
from chorus.store import SessionRecord, UnknownSessionError

if TYPE_CHECKING:  # the policy's engine loads with the first gate, not at the start
    from chorus.policy import PolicyGate

log = logging.getLogger("chorus.session")

#: How long closing sessions may take to record their last events.
_DRAIN_GRACE = 10.0
#: Longest a new spare waits for the turn of the session that took the last one.
SPARE_AFTER_S = 60.0


@dataclass(frozen=True, slots=True)
class _Own:
    """The gate a body starts under, and the session's own gate: given now, or built
    by ``later`` on first use."""

    start: PolicyGate | None
    session: PolicyGate | None
    later: Callable[[], PolicyGate | None] | None


@dataclass(frozen=True, slots=True)
class HubLimits:
    #: Close a session's body after this long with nothing to do (0: never).
    idle_timeout_s: float = 600.0
    #: Sessions a brain may open (the daemon's own jobs are bounded by its queue).
    max_sessions: int = 64
    #: Idle warm bodies kept at most; beyond it the least recently used is closed (its
    #: next turn resumes natively). Without it every ``chorus ask`` (a new session)
    #: left a CLI process for ``idle_timeout_s``: thousands under load.
    max_idle: int = 16
    #: Brain messages one session holds before ``queue_full``.
    max_queued: int = 100
    #: Keep one pre-started spare body per recently used (body, cwd, options).
    spares: bool = False
    #: What an attached brain's answer to a permission ask may do (``[brain] authority``).
    brain_authority: Authority = "escalate-only"
    #: ``[gateway] allowed_cwds``: where a brain may open a session.
    allowed_cwds: tuple[str, ...] = ()


class SessionHub:
    """Live sessions keyed by stored session id. Run :meth:`run` in a task for the
    hub's life: it owns the drivers, reaps idle sessions and closes every body when
    cancelled."""

    def __init__(
        self,
        launcher: BodyLauncher,
        limits: HubLimits | None = None,
        *,
        permission: PermissionCallback = allow_all,
    ) -> None:
        self.launcher = launcher
        self.store = launcher.store
        self.limits = limits or HubLimits()
        self._permission = permission
        self._live: dict[str, Session] = {}
        self._drivers: dict[str, asyncio.Task[None]] = {}
        # a session's lock lives while someone holds or awaits it (not one per session
        # ever seen: a long-running daemon would keep them all)
        self._locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()
        self._starting = 0
        self._tg: asyncio.TaskGroup | None = None
        self._ready = asyncio.Event()
        self.spares = SparePool()

    def __len__(self) -> int:
        return len(self._live)

    def get(self, session_id: str) -> Session | None:
        return self._live.get(session_id)

    def ids(self) -> list[str]:
        return sorted(self._live)

    def sessions(self) -> list[Session]:
        return list(self._live.values())

    # -- running ----------------------------------------------------------------------------

    async def run(self) -> None:
        """Own the drivers until cancelled; then close every session (bounded)."""
        async with asyncio.TaskGroup() as tg:
            self._tg = tg
            self._ready.set()
            try:
                await self._reap_forever()
            finally:
                self._tg = None
                self._ready.clear()
                await self._close_all()
                await self.spares.close()
                self.launcher.close()

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[SessionHub]:
        """Run the hub for the block's life."""
        task = asyncio.create_task(self.run(), name="session-hub")
        await self._ready.wait()
        try:
            yield self
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _reap_forever(self) -> None:
        timeout = self.limits.idle_timeout_s
        period = min(30.0, timeout / 4) if timeout else 3600.0
        while True:
            await asyncio.sleep(period)
            if timeout:
                await self.reap(timeout)

    async def reap(self, idle_limit: float) -> list[str]:
        """Close sessions unused for ``idle_limit`` seconds; returns their ids."""
        now = time.monotonic()
        closed = []
        for session in list(self._live.values()):
            since = max(session.idle_since, session.detached_at)
            if session.unused and now - since > idle_limit:
                log.info("closing session %s: unused for %.0f s", session.id, idle_limit)
                await session.close()
                closed.append(session.id)
        return closed

    async def _close_all(self) -> None:
        sessions = list(self._live.values())
        if keep_flag().exists():  # chorus stop --keep-bodies
            sessions = await self._detach_all(sessions)
        await asyncio.gather(*(s.close() for s in sessions), return_exceptions=True)
        drivers = list(self._drivers.values())
        if drivers:
            await asyncio.wait(drivers, timeout=_DRAIN_GRACE)

    async def _detach_all(self, sessions: list[Session]) -> list[Session]:
        """Leave the detachable bodies running (their drivers stop, nothing is recorded
        as ended); returns the sessions whose bodies cannot outlive us."""
        kept = await asyncio.gather(*(s.detach() for s in sessions), return_exceptions=True)
        rest = []
        for session, detached in zip(sessions, kept, strict=True):
            if detached is True:
                self._drivers[session.id].cancel()
                log.info("left the body of session %s running", session.id)
            else:
                rest.append(session)
        return rest

    async def close(self, session_id: str) -> bool:
        """Close a live session's body and wait for its driver; False if none was live."""
        session = self._live.get(session_id)
        if session is None:
            return False
        driver = self._drivers.get(session_id)
        await session.close()
        if driver is not None:
            await asyncio.wait({driver}, timeout=_DRAIN_GRACE)
        return True

    # -- attaching (brains) ------------------------------------------------------------------

    def attach(self, session: Session) -> None:
        session.connections += 1

    def detach(self, session: Session) -> None:
        session.connections = max(0, session.connections - 1)
        if session.connections == 0:
            session.detached_at = time.monotonic()

    # -- opening (brains) --------------------------------------------------------------------

    async def open(
        self,
        *,
        body: str | None,
        model: str | None = None,
        cwd: str | None = None,
        permission_mode: str | None = None,
        resume: str | None = None,
        transport: dict[str, object] | None = None,
        brief: Brief | None = None,
    ) -> tuple[Session, bool]:
        """The session a brain attaches to, and whether it existed before.

        With ``resume``: the live session, else the stored one restarted with its
        CLI's native resume. Without: a new session on ``body`` in ``cwd``
        (default: the daemon's folder; must be absolute). ``brief``: the client's
        instructions and MCP servers for a body it starts (what the body cannot take
        is said in a :class:`CompatibilityWarning`). Raises :class:`SessionError` or
        the body's start errors.
        """
        brief = brief or Brief()
        if resume is not None:
            session = await self._resume(resume, body, model, permission_mode, brief)
            return session, True
        body = self._check_body(body)
        folder = checked_cwd(cwd)
        self._check_brain_cwd(folder)
        checked_mode(permission_mode)  # bad input writes nothing (no session left "starting")
        with self._reserve():
            record = await self.store.create_session(
                body, model=model, cwd=str(folder), state="starting", transport=transport or {}
            )
            own = self._own_gate(record, permission_mode, None)
            launch = self._launch(body, model, None, own.start, permission_mode, brief)
            return await self._start(record, launch, own), False

    def _check_brain_cwd(self, folder: Path) -> None:
        guards = self.launcher.guards
        denied = guards.policy.filesystem.denied_paths if guards else list(SENSITIVE_PATHS)
        allowed = list(self.limits.allowed_cwds)
        problem = brain_cwd_problem(folder, allowed, denied, PathContext.current(folder))
        if problem is not None:
            raise SessionError("invalid_request", f"cwd refused: {problem}")

    async def _resume(
        self, session_id: str, body: str | None, model: str | None, mode: str | None, brief: Brief
    ) -> Session:
        async with self._lock(session_id):
            live = self._live.get(session_id)
            if live is not None and not live.ended:
                _check_same_body(live.body_name, body)
                live.touch()
                return live
            record = await self._record(session_id)
            _check_same_body(_active_body(record), body)
            with self._reserve():
                own = self._own_gate(record, mode, None)
                name = _active_body(record)
                resume = native_ids(record).get(name)
                launch = self._launch(name, model or record.model, resume, own.start, mode, brief)
                return await self._start(record, launch, own)

    @contextlib.contextmanager
    def _reserve(self) -> Iterator[None]:
        """Count a session as live while its body starts, so concurrent opens respect
        ``max_sessions``."""
        if len(self._live) + self._starting >= self.limits.max_sessions:
            raise SessionError(
                "too_many_sessions", f"{self.limits.max_sessions} sessions are live already"
            )
        self._starting += 1
        try:
            yield
        finally:
            self._starting -= 1

    # -- acquiring (the supervisor's jobs) ---------------------------------------------------------

    async def acquire(
        self,
        session_id: str,
        body: str,
        *,
        model: str | None = None,
        gate: PolicyGate | None = None,
        mode: str | None = None,
        brief: Brief | None = None,
    ) -> Session:
        """The live session for a job's next turn on ``body``: the warm one when it can
        take the turn, else a new body (the old one closed) with native resume, its
        context assembled for ``brief`` (the job's task and plan)."""
        async with self._lock(session_id):
            live = self._live.get(session_id)
            native = self.launcher.native_flags(body, gate)
            args = native.args if native is not None else None
            wanted = native_mode(gate, mode)
            same_body_busy = live is not None and live.busy and live.body_name == body
            if live is not None and (same_body_busy or live.can_take(body, model, args, wanted)):
                live.touch()
                return live
            if live is not None:
                await self.close(session_id)
            record = await self._record(session_id)
            resume = native_ids(record).get(body)
            own = self._own_gate(record, mode, gate)
            launch = self._launch(body, model, resume, own.start, mode, brief or Brief())
            if resume is None and self.limits.spares:
                key: SpareKey = (body, record.cwd or "", model, wanted, args)
                return await self._start_from_spare(record, launch, own, key)
            return await self._start(record, launch, own)

    def gate(self, record: SessionRecord, mode: str | None) -> PolicyGate | None:
        """A fresh policy gate for a turn on ``record`` (None without a policy)."""
        return self.launcher.gate(record, mode)

    def _own_gate(self, record: SessionRecord, mode: str | None, turn: PolicyGate | None) -> _Own:
        """The gate a body starts under and the session's own: a job's turn brings its
        gate (the session builds its own only when a brain's turn needs it); else one
        gate, built now, is both."""
        if turn is not None:
            return _Own(turn, None, functools.partial(self.launcher.gate, record, mode))
        gate = self.launcher.gate(record, mode)
        return _Own(gate, gate, None)

    async def _start_from_spare(
        self, record: SessionRecord, launch: Launch, own: _Own, key: SpareKey
    ) -> Session:
        """Start a fresh session on the waiting spare (or a new body), then prime the
        next spare for the same key in the background."""
        spare = self.spares.take(key)
        if spare is None:
            session = await self._start(record, launch, own)
        else:
            session = self._new_session(record, launch.body, own)
            await session.adopt(spare)
            self._register(session)
        if self._tg is not None:
            make = functools.partial(self.launcher.spare, record.cwd or "", launch)
            self._tg.create_task(self._prime_after(session, key, make), name=f"spare-{key[0]}")
        return session

    async def _prime_after(
        self, session: Session, key: SpareKey, make: Callable[[], Spare]
    ) -> None:
        """Start the next spare for ``key`` once the session's first turn is over: a
        spare's start is a whole CLI booting, which took the CPU from the turn it was
        started beside (on two cores, a Claude job on a spare took 360 ms beside it
        and 270 ms after it, where the bare CLI takes 590 ms)."""
        await session.a_turn_over(SPARE_AFTER_S)
        await self.spares.prime(key, make)

    # -- re-attaching ---------------------------------------------------------------

    async def reattach(
        self,
        record: SessionRecord,
        snap: Snapshot,
        *,
        gate: PolicyGate | None = None,
        mode: str | None = None,
        first: Turn | None = None,
    ) -> Session:
        """Make the detached body of ``snap`` (a previous daemon's) the live session of
        ``record`` again, ``first`` (its open turn) followed before anything else.
        Raises :class:`BodyCrashedError` when that body is gone or its output cut."""
        async with self._lock(record.id):
            name = _active_body(record)
            own = self._own_gate(record, mode, gate)
            session = self._new_session(record, name, own)
            resume = native_ids(record).get(name)
            # The live body keeps the context it was started with: no new brief.
            launch = self._launch(name, record.model, resume, gate, mode, Brief())
            drop = await handed_out(self.store, record.id, snap)
            cls = body_class(name, self.launcher.config)

            async def attach(ask: PermissionCallback) -> Body:
                options = self.launcher.options(record, _asking(launch, ask))
                return await cls.attach(
                    options, snap.handle, turn_open=first is not None, drop=drop, counted=counted
                )

            await session.attach(attach, first)
            self._register(session)
            return session

    # -- starting ------------------------------------------------------------------------------

    def _launch(
        self,
        body: str,
        model: str | None,
        resume: str | None,
        gate: PolicyGate | None,
        mode: str | None,
        brief: Brief,
    ) -> Launch:
        return Launch(body, model, resume, gate, mode, self._permission, brief=brief)

    async def _start(self, record: SessionRecord, launch: Launch, own: _Own) -> Session:
        """Start ``launch``'s body as the live session of ``record``, with ``own`` as
        the session's own gate (brain turns; a job's turns bring theirs)."""
        session = self._new_session(record, launch.body, own)
        if launch.resume:  # should native resume fail, the log rebuilds the conversation
            tokens = self.launcher.config.router.handoff_tokens
            launch = replace(launch, history=await session_history(self.store, record.id, tokens))
        try:
            await session.start(lambda ask: self.launcher.create(record, _asking(launch, ask)))
        except BaseException:
            with contextlib.suppress(Exception):
                await self.store.update_session(record.id, state="failed")
            raise
        self._register(session)
        for control, message in _unmet(launch, self.launcher):
            await session.warn(control, message)
        return session

    def _new_session(self, record: SessionRecord, body: str, own: _Own) -> Session:
        if self._tg is None:
            raise SessionError("internal", "the session hub is not running")
        return Session(
            _with_body(record, body),
            self.store,
            gate=own.session,
            make_gate=own.later,
            permission=self._permission,
            max_queued=self.limits.max_queued,
            authority=self.limits.brain_authority,
            recall=self.launcher.recall,  # memory for a warm body's turns
        )

    def _register(self, session: Session) -> None:
        """Make a started session live and give it its driver."""
        tg = self._tg
        if tg is None:
            raise SessionError("internal", "the session hub is not running")
        session.touch()
        self._live[session.id] = session
        self._drivers[session.id] = tg.create_task(self._drive(session), name=f"s-{session.id}")
        if len(self._live) > self.limits.max_idle:
            tg.create_task(self.trim_idle(keep=session.id), name="session-trim")

    async def trim_idle(self, keep: str | None = None) -> list[str]:
        """Close the least recently used unused sessions beyond ``limits.max_idle``
        (never ``keep``); returns their ids."""
        idle = [s for s in self._live.values() if s.unused and s.id != keep]
        idle.sort(key=lambda s: max(s.idle_since, s.detached_at))
        extra = idle[: max(0, len(idle) - self.limits.max_idle)]
        for session in extra:
            log.info("closing session %s: over %d idle bodies", session.id, self.limits.max_idle)
            await session.close()
        return [s.id for s in extra]

    async def _drive(self, session: Session) -> None:
        try:
            await session.drive()
            await session.close()  # an ended body's files go with it
        finally:
            if self._live.get(session.id) is session:
                del self._live[session.id]
                self._drivers.pop(session.id, None)

    def _lock(self, session_id: str) -> asyncio.Lock:
        return self._locks.setdefault(session_id, asyncio.Lock())

    async def _record(self, session_id: str) -> SessionRecord:
        try:
            return await self.store.get_session(session_id)
        except UnknownSessionError as exc:
            raise SessionError("session_not_found", str(exc)) from exc

    def _check_body(self, name: str | None) -> str:
        known = body_names(self.launcher.config)
        if name is None or name not in known:
            raise SessionError("unknown_body", f"unknown body {name!r}; known: {', '.join(known)}")
        return name


def _unmet(launch: Launch, launcher: BodyLauncher) -> list[tuple[str, str]]:
    """What the body cannot take of a client's brief, as ``(control, message)``."""
    brief = launch.brief
    out = [("mcp_servers", message) for message in brief.skipped]
    if brief.system_prompt and not launcher.replaces_system_prompt(launch.body):
        message = (
            f"{launch.body} cannot replace its CLI's system prompt: the given one was "
            "added to it (through the body's own channel)"
        )
        out.append(("system_prompt", message))
    return out


def _asking(launch: Launch, ask: PermissionCallback) -> Launch:
    return replace(launch, permission=ask)


def _with_body(record: SessionRecord, body: str) -> SessionRecord:
    """``record`` as served by ``body`` now (it moves on failover)."""
    return replace(record, body=body)


def _active_body(record: SessionRecord) -> str:
    """The body a session runs on now (it moves on failover)."""
    active = record.transport.get("active_body")
    return active if isinstance(active, str) else record.body


def _check_same_body(actual: str, asked: str | None) -> None:
    if asked is not None and asked != actual:
        raise SessionError("invalid_request", f"the session runs body {actual!r}, not {asked!r}")


def checked_cwd(raw: str | None) -> Path:
    """An absolute, existing folder (default: the current one), resolved."""
    folder = Path(raw or os.getcwd()).expanduser()
    if not folder.is_absolute():
        raise SessionError("invalid_request", f"cwd must be absolute, not {raw!r}")
    if not folder.is_dir():
        raise SessionError("invalid_request", f"cwd {folder} is not a directory")
    return folder.resolve()
