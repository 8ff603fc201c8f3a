"""Jobs and their worktrees: the supervisor's hooks, in the order a job meets them.

1. :func:`prepare_job_worktree` (at submit): plan, create and record the worktree,
   or find the one the job's session already runs in; the job's session gets
   the worktree as its folder, so every later turn resumes there;
2. :func:`start_job_worktree` (before every start): the guard, then the lock;
3. :func:`finish_job_worktree` (at the end): commit what the body left, unlock.

Which worktree a job uses is ``job.options["worktree"]``: the id of the job that
created it (the job itself, or the first job of its session).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from chorus._errors import UserError
from chorus.config import ChorusConfig
from chorus.events import ErrorCode, ErrorInfo, TurnFailed, Worktree
from chorus.store import (
    ORIGIN_CHORUS,
    JobRecord,
    Store,
    UnknownWorktreeError,
    WorktreeRecord,
    new_id,
)
from chorus.worktrees import _create, _ops
from chorus.worktrees._errors import NotARepositoryError, WorktreeError, WorktreeGuardError
from chorus.worktrees._naming import first_line
from chorus.worktrees._state import WorktreeState, check_transition

log = logging.getLogger("chorus.worktrees")
_repo_locks: dict[str, asyncio.Lock] = {}


def repo_lock(repo: str) -> asyncio.Lock:
    """One lock per repository: creation, merges and removals there never overlap."""
    return _repo_locks.setdefault(repo, asyncio.Lock())


class WorktreeAsk(Protocol):
    """What a job request says about worktrees (``chorus.daemon.JobRequest`` has it)."""

    @property
    def prompt(self) -> str: ...
    @property
    def cwd(self) -> str | None: ...
    @property
    def session_id(self) -> str | None: ...
    @property
    def worktree(self) -> bool | None: ...
    @property
    def branch(self) -> str | None: ...
    @property
    def base(self) -> str | None: ...


@dataclass(slots=True)
class PreparedJob:
    """The job id to create the job with, the folder its new session runs in, and
    the options that tie the job to its worktree."""

    job_id: str
    cwd: str | None
    options: dict[str, Any] = field(default_factory=dict)


@contextlib.asynccontextmanager
async def prepare_job_worktree(
    store: Store, config: ChorusConfig, ask: WorktreeAsk
) -> AsyncIterator[PreparedJob]:
    """Create (or find) the job's worktree; create the session and the job inside
    the ``async with``. If that body raises, a worktree made here is removed again.
    Bad input raises a :class:`WorktreeError` before anything is written."""
    job_id = new_id()
    if ask.session_id:
        yield PreparedJob(job_id, ask.cwd, await _session_worktree(store, ask))
        return
    spec = await _planned(config, ask, job_id)
    if spec is None:
        yield PreparedJob(job_id, ask.cwd)
        return
    async with repo_lock(str(spec.main)):
        made = await asyncio.to_thread(_create.create, spec, config.worktree)
    try:
        await store.create_worktree(_record(spec, made, node_host(config)))
        cwd = spec.job_cwd if spec.job_cwd.is_dir() else spec.path
        yield PreparedJob(job_id, str(cwd), {"worktree": job_id})
    except BaseException:
        await asyncio.to_thread(_create.undo, spec)
        with contextlib.suppress(Exception):
            await store.update_worktree(job_id, state=WorktreeState.REMOVED, info={"undone": True})
        raise


async def _planned(config: ChorusConfig, ask: WorktreeAsk, job_id: str) -> _create.Spec | None:
    """The checked plan, or None when the job runs in place. With ``[daemon] worktree
    = "auto"`` a folder outside any repository runs in place; asked for, it is an error."""
    wanted = ask.worktree if ask.worktree is not None else config.daemon.worktree == "auto"
    if not wanted:
        if ask.branch or ask.base:
            raise UserError("--branch and --base only apply with --worktree")
        return None
    cwd = await asyncio.to_thread(lambda: Path(ask.cwd or ".").expanduser().resolve())
    try:
        return await asyncio.to_thread(
            _create.plan,
            cwd,
            job_id,
            ask.prompt,
            config.worktree,
            branch=ask.branch,
            base=ask.base,
        )
    except NotARepositoryError:
        if ask.worktree:
            raise
        return None


async def _session_worktree(store: Store, ask: WorktreeAsk) -> dict[str, Any]:
    """A job continuing a session runs where the session does: in its worktree, if any."""
    session = await store.get_session(ask.session_id or "")
    found = await find_by_folder(store, session.cwd)
    if found is None and ask.worktree:
        raise UserError(
            f"session {session.id} does not run in a worktree; --worktree starts a new "
            "session, so drop --session (or --worktree)"
        )
    if ask.branch or ask.base:
        raise UserError("--branch and --base apply to a new worktree, not to --session")
    return {"worktree": found.job_id} if found is not None else {}


async def find_by_folder(store: Store, folder: str | None) -> WorktreeRecord | None:
    """The worktree record whose folder is ``folder`` or contains it, in any state:
    a session whose worktree was removed must meet the guard, not run elsewhere."""
    if not folder:
        return None
    here = Path(folder)
    for rec in await store.list_worktrees():
        if here == Path(rec.path) or Path(rec.path) in here.parents:
            return rec
    return None


def node_host(config: ChorusConfig) -> str:
    """The host this daemon's worktrees live on (``[store] host``, else the machine's):
    on a shared store, other hosts' records name folders this one cannot see."""
    return config.store.host or socket.gethostname()


def _record(spec: _create.Spec, made: _create.Created, host: str) -> WorktreeRecord:
    info = {
        "host": host,
        "warnings": list(spec.warnings),
        "notes": made.notes,
        "copied": made.copied,
        "announced": False,
    }
    return WorktreeRecord(
        job_id=spec.job_id,
        repo=str(spec.main),
        path=str(spec.path),
        branch=spec.branch,
        base=spec.base,
        base_commit=spec.base_commit,
        into=spec.into,
        state=WorktreeState.READY,
        created_at=0.0,
        updated_at=0.0,
        info=info,
    )


def copied_of(rec: WorktreeRecord) -> list[str]:
    """The files copied into the worktree at creation (never committed)."""
    copied = rec.info.get("copied", [])
    return [str(c) for c in copied] if isinstance(copied, list) else []


async def job_worktree(store: Store, job: JobRecord) -> WorktreeRecord | None:
    """The worktree the job runs in, or None."""
    owner = job.options.get("worktree")
    if not isinstance(owner, str):
        return None
    with contextlib.suppress(UnknownWorktreeError):
        return await store.get_worktree(owner)
    return None


async def emit(store: Store, job: JobRecord, rec: WorktreeRecord, action: str, detail: str) -> None:
    """Append a :class:`Worktree` event to the job's session log."""
    if not job.session_id:
        return
    event = Worktree(action=action, path=rec.path, branch=rec.branch, detail=detail, job_id=job.id)
    await store.append(job.session_id, event, origin=ORIGIN_CHORUS)


async def set_state(store: Store, rec: WorktreeRecord, wanted: WorktreeState) -> WorktreeRecord:
    if rec.state == wanted:
        return rec
    check_transition(rec.job_id, rec.state, wanted)
    return await store.update_worktree(rec.job_id, state=wanted)


async def start_job_worktree(store: Store, job: JobRecord) -> TurnFailed | None:
    """Before every start: the guard, then ``git worktree lock``. Returns the failure
    the job must end with when its worktree is unusable (it does not run at all)."""
    rec = await job_worktree(store, job)
    if rec is None:
        return None
    try:
        await asyncio.to_thread(_ops.guard, Path(rec.path), rec.branch)
        await _announce(store, job, rec)
        await asyncio.to_thread(_ops.lock, Path(rec.repo), Path(rec.path), job.id)
    except WorktreeError as exc:
        await _refuse(store, job, rec, exc)
        return TurnFailed(error=ErrorInfo(code=ErrorCode.INVALID_REQUEST, message=str(exc)))
    rec = await set_state(store, rec, WorktreeState.LOCKED)
    await emit(store, job, rec, "locked", f"chorus job {job.id} is running")
    return None


async def guard_job_worktree(store: Store, job: JobRecord) -> TurnFailed | None:
    """The guard alone, before a body (re)starts within the job (crash restart,
    failover): the failure the attempt ends with when the worktree is unusable."""
    rec = await job_worktree(store, job)
    if rec is None:
        return None
    try:
        await asyncio.to_thread(_ops.guard, Path(rec.path), rec.branch)
    except WorktreeGuardError as exc:
        await _refuse(store, job, rec, exc)
        return TurnFailed(error=ErrorInfo(code=ErrorCode.INVALID_REQUEST, message=str(exc)))
    return None


async def _announce(store: Store, job: JobRecord, rec: WorktreeRecord) -> None:
    """The ``created`` event, once, with what creation noted (copies, setup, warnings)."""
    if rec.info.get("announced", True):
        return
    detail = "; ".join([f"from {rec.base} ({rec.base_commit[:10]})", *rec.info.get("notes", [])])
    warnings = rec.info.get("warnings", [])
    await emit(store, job, rec, "created", "; ".join([detail, *warnings]))
    await store.update_worktree(rec.job_id, info={**rec.info, "announced": True})


async def _refuse(store: Store, job: JobRecord, rec: WorktreeRecord, exc: WorktreeError) -> None:
    gone = not await asyncio.to_thread(Path(rec.path).exists)
    if isinstance(exc, WorktreeGuardError) and gone:
        with contextlib.suppress(WorktreeError):
            await set_state(store, rec, WorktreeState.MISSING)
    await emit(store, job, rec, "refused", str(exc))


async def finish_job_worktree(store: Store, job: JobRecord) -> None:
    """At the job's end: commit whatever the body left uncommitted (message: the
    prompt's first line) and unlock. Never raises: the job must still end."""
    rec = await job_worktree(store, job)
    if rec is None or rec.state != WorktreeState.LOCKED:
        return  # no worktree, or the start refused it
    try:
        made = await asyncio.to_thread(
            _ops.autocommit, Path(rec.path), first_line(job.prompt), rec.branch, copied_of(rec)
        )
        if made is not None:
            await emit(store, job, rec, "committed", f"{made[0]}: {made[1]} file(s)")
        await asyncio.to_thread(_ops.unlock, Path(rec.repo), Path(rec.path))
        await set_state(store, rec, WorktreeState.READY)
        await emit(store, job, rec, "unlocked", "")
    except WorktreeGuardError as exc:  # it vanished under the job: nothing to commit to
        await _refuse(store, job, rec, exc)
    except Exception as exc:  # a failed commit is reported, never fatal to the job's end
        log.exception("job %s: finishing its worktree failed", job.id)
        await emit(store, job, rec, "refused", f"could not commit or unlock: {exc}")
