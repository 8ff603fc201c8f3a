"""What the supervisor does when the log itself cannot be written (a full disk), and
when it starts again after a crash with bodies still running.

A job whose events cannot be stored fails with the stable code ``storage_full``,
and its end (state + JobEnded, one transaction) is retried until space is back,
so the job never stays ``running`` with nobody to finish it.

A body started detached outlives a daemon killed with SIGKILL: the next daemon
re-attaches to it (see :mod:`chorus.session._reattach`) and the running job follows
the turn the body is still running, instead of asking the model again.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import signal
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from chorus._errors import BodyCrashedError, BodyError, BodyProtocolError, BodyTimeoutError
from chorus.config import chorus_home
from chorus.events import ErrorCode, ErrorInfo, Event, Notice, SessionEnded, TurnFailed
from chorus.session import (
    Session,
    SessionHub,
    Snapshot,
    Turn,
    discard,
    job_turn,
    keep_flag,
    snapshot_of,
    start_time,
)
from chorus.store import ORIGIN_CHORUS, JobRecord, SessionRecord, StorageFullError, Store

if TYPE_CHECKING:  # the policy's engine loads with the first gate, not at the start
    from chorus.policy import PolicyGate

log = logging.getLogger("chorus.daemon")
T = TypeVar("T")

#: Waits between tries of a write refused for lack of space (the last one repeats).
RETRY_DELAYS_S = (0.2, 0.5, 1.0, 2.0, 5.0)


def error_info(exc: Exception) -> ErrorInfo:
    """The error a job fails with when running it raised ``exc`` (instead of ending
    with a failed turn): a stable code for every cause Chorus can tell apart."""
    if _caused_by_full_disk(exc) or (isinstance(exc, BodyError) and _log_disk_full()):
        return ErrorInfo(
            code=ErrorCode.STORAGE_FULL,
            message=f"the event log could not be written (disk full): {exc}",
            retryable=True,
        )
    if isinstance(exc, BodyCrashedError):
        return _crashed(exc)
    for kind, code in _BODY_CODES:
        if isinstance(exc, kind):
            return ErrorInfo(code=code, message=f"the agent CLI failed: {exc}")
    return ErrorInfo(code=ErrorCode.UNKNOWN, message=f"chorus error: {exc}")


_BODY_CODES: tuple[tuple[type[BodyError], ErrorCode], ...] = (
    (BodyTimeoutError, ErrorCode.TIMEOUT),
    (BodyProtocolError, ErrorCode.BODY_PROTOCOL),
)


def _crashed(exc: BodyCrashedError) -> ErrorInfo:
    """A CLI that died (often at once: a bad flag, a missing login, a broken install)."""
    code = f"exit code {exc.exit_code}" if exc.exit_code is not None else "no exit code yet"
    tail = exc.stderr_tail.strip()[-2000:]
    message = f"the agent CLI exited ({code}): {exc}" + (f"\n{tail}" if tail else "")
    native = {"exit_code": exc.exit_code, "stderr_tail": tail}
    return ErrorInfo(code=ErrorCode.BODY_CRASHED, message=message, native=native)


def _caused_by_full_disk(exc: BaseException) -> bool:
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, StorageFullError):
            return True
        if isinstance(seen, OSError) and seen.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


#: Free space under which the log's disk counts as full (a body's output file,
#: which shares it, is then lost, and the body dies of it).
FULL_BELOW_BYTES = 64 * 1024


def _log_disk_full() -> bool:
    """Whether the disk holding Chorus's home (the log, the store, each detached
    body's output file) is full now: a body that dies then died of it."""
    try:
        stats = os.statvfs(chorus_home())
    except OSError:
        return False
    return stats.f_bavail * stats.f_frsize < FULL_BELOW_BYTES


async def until_stored(write: Callable[[], Awaitable[T]], what: str) -> T:
    """Run ``write`` until it is not refused for lack of space; other errors raise."""
    tries = 0
    while True:
        try:
            result = await write()
        except StorageFullError as exc:
            delay = RETRY_DELAYS_S[min(tries, len(RETRY_DELAYS_S) - 1)]
            if tries == 0:
                log.error("%s: the disk is full; retrying until space is back (%s)", what, exc)
            tries += 1
            await asyncio.sleep(delay)
            continue
        if tries:
            log.warning("%s: stored once space was back (after %d refused tries)", what, tries)
        return result


# -- bodies that outlived the daemon --------------------------------------------

#: The supervisor's gate maker: (job, session, mode) → the job's gate.
GateFor = Callable[[JobRecord, SessionRecord, str | None], "PolicyGate | None"]


@dataclass(frozen=True, slots=True)
class Followed:
    """A requeued job whose turn a re-attached body runs (or ran) already."""

    session: Session
    turn: Turn
    #: The turn's policy gate (the job's run takes it over).
    gate: PolicyGate | None = None


async def reattach_bodies(
    hub: SessionHub,
    requeued: list[JobRecord],
    gate_for: GateFor,
    only: set[str] | None = None,
) -> dict[str, Followed]:
    """At start: make every detached body a dead daemon left running live again (its
    pid and start time checked), each running job's turn followed where it is; a
    body that died meanwhile (or whose output is lost) is removed and its job resumes
    natively. ``only``: just these sessions (a shared store's other sessions belong
    to live nodes). Returns the followed jobs by id."""
    store = hub.store
    keep_flag().unlink(missing_ok=True)  # a later plain stop closes bodies again
    jobs = {job.session_id: job for job in requeued if job.session_id and _direct(job)}
    followed: dict[str, Followed] = {}
    for record in await store.list_sessions(state="active", limit=10_000):
        snap = snapshot_of(record)
        if snap is None or hub.get(record.id) is not None:
            continue
        if only is not None and record.id not in only:
            continue
        job = jobs.get(record.id)
        try:
            turn = await _reattach(hub, record, snap, job, gate_for)
        except BodyError as exc:
            discard(snap)
            await _lost(store, record, job, f"{exc}; resuming natively")
            continue
        if turn is not None and job is not None:
            followed[job.id] = turn
    return followed


async def _reattach(
    hub: SessionHub,
    record: SessionRecord,
    snap: Snapshot,
    job: JobRecord | None,
    gate_for: GateFor,
) -> Followed | None:
    if not snap.alive:
        raise BodyCrashedError(
            "the body ended while the daemon was down", exit_code=None, stderr_tail=""
        )
    if job is None:
        await hub.reattach(record, snap)
        return None
    mode = job.options.get("permission_mode")
    gate = gate_for(job, record, mode)
    started, final = await job_turn(hub.store, record.id, job.id)
    turn = Turn("", job_id=job.id, gate=gate, follow=True)
    if final is not None:  # the turn had ended; only the job's end was missing
        turn.done.set_result(final)
    first = turn if started and final is None else None
    session = await hub.reattach(record, snap, gate=gate, mode=mode, first=first)
    log.info("re-attached session %s (pid %d) for job %s", record.id, snap.handle.pid, job.id)
    return Followed(session, turn, gate) if started else None


async def _lost(store: Store, record: SessionRecord, job: JobRecord | None, why: str) -> None:
    log.warning("session %s: %s", record.id, why)
    if job is None:
        return
    notice = Notice(message=f"body_crashed: {why}", kind="recovery", job_id=job.id)
    await store.append(record.id, notice, origin=ORIGIN_CHORUS)


def _direct(job: JobRecord) -> bool:
    framework = job.options.get("framework")
    return not isinstance(framework, str) or framework == "direct"


async def follow(followed: Followed) -> Event:
    """The followed turn's end, as the job's attempt sees it (a body that went away
    mid-turn is a crash)."""
    final = await asyncio.shield(followed.turn.done)
    if isinstance(final, SessionEnded):
        error = final.error or ErrorInfo(
            code=ErrorCode.BODY_CRASHED, message="the body ended without a result"
        )
        return TurnFailed(error=error)
    return final


async def kill_orphans(hub: SessionHub, only: set[str] | None = None) -> None:
    """Bodies a killed daemon left (a running job's, or a warm idle one) still run in
    their own process groups: end them so a resumed one does not race them on the
    same native session, and no idle CLI lingers. ``only``: just these sessions (on
    a shared store the other active sessions belong to live nodes)."""
    for session in await hub.store.list_sessions(state="active", limit=10_000):
        if hub.get(session.id) is None and (only is None or session.id in only):
            _kill_orphan(session)


def _kill_orphan(session: SessionRecord) -> None:
    pgid = session.transport.get("pgid")
    started = session.transport.get("pgid_started")
    # Only the very process we started: a pid reused since (e.g. after a reboot)
    # has another start time, and is left alone.
    if isinstance(pgid, int) and pgid > 1 and started == start_time(pgid):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)


def orphaned_sessions(jobs: list[JobRecord]) -> set[str]:
    """The sessions of the jobs this node left running (its orphans)."""
    return {job.session_id for job in jobs if job.session_id}
