"""The user's operations on job worktrees (``chorus worktree ...``), run by the
daemon: list, diff, merge, rm, prune, and the orphan report at daemon start.

Each finds the record by job id (or a unique prefix of it), works under the
repository's lock, records the new state and appends a :class:`Worktree` event
to the owning job's session. A running job's worktree (``locked``) is never
merged or removed.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import asdict
from pathlib import Path
from typing import Any

from chorus.config import ChorusConfig
from chorus.store import Store, UnknownWorktreeError, WorktreeRecord
from chorus.worktrees import _git as git
from chorus.worktrees import _ops
from chorus.worktrees._errors import GitError, UnmergedWorkError, WorktreeError
from chorus.worktrees._jobs import copied_of, emit, node_host, repo_lock, set_state
from chorus.worktrees._naming import worktrees_root
from chorus.worktrees._state import WorktreeState

log = logging.getLogger("chorus.worktrees")


async def resolve(store: Store, ref: str) -> WorktreeRecord:
    """The record of job ``ref``: its full id or a unique prefix of it."""
    with_prefix = [r for r in await store.list_worktrees() if r.job_id.startswith(ref)]
    exact = [r for r in with_prefix if r.job_id == ref]
    if exact or len(with_prefix) == 1:
        return (exact or with_prefix)[0]
    if not with_prefix:
        raise UnknownWorktreeError(ref)
    raise WorktreeError(f"{ref!r} matches {len(with_prefix)} jobs' worktrees; give more of the id")


async def _status(rec: WorktreeRecord) -> _ops.Status:
    tip = rec.info.get("merged_tip")
    return await asyncio.to_thread(
        _ops.status, Path(rec.repo), Path(rec.path), rec.branch, rec.into, tip, copied_of(rec)
    )


async def describe(rec: WorktreeRecord) -> dict[str, Any]:
    """The record with its live status (ahead/behind, dirty, unmerged commits)."""
    data = asdict(rec)
    if rec.state == WorktreeState.REMOVED:
        return {**data, "exists": False, "dirty": 0, "ahead": 0, "behind": 0, "unmerged": []}
    try:
        st = await _status(rec)
    except GitError as exc:  # the repository itself is gone or broken
        return {**data, "exists": False, "error": str(exc)}
    live = asdict(st)
    live.pop("tip")
    return {**data, **live}


async def list_all(store: Store) -> list[dict[str, Any]]:
    return [await describe(rec) for rec in await store.list_worktrees()]


async def diff(store: Store, ref: str) -> str:
    rec = await resolve(store, ref)
    return await asyncio.to_thread(_ops.diff, Path(rec.repo), rec.branch, rec.into)


def _check_idle(rec: WorktreeRecord, what: str) -> None:
    if rec.state == WorktreeState.LOCKED:
        raise WorktreeError(f"job {rec.job_id} is still running in {rec.path}; {what} it later")
    if rec.state == WorktreeState.REMOVED:
        raise WorktreeError(f"the worktree of job {rec.job_id} was removed already")


async def merge(store: Store, ref: str, *, squash: bool = False) -> dict[str, Any]:
    """Merge the job's branch into the branch it came from (see :func:`_ops.merge`)."""
    rec = await resolve(store, ref)
    _check_idle(rec, "merge")
    message = f"{rec.branch} (chorus job {rec.job_id[:8]}, squashed)"
    async with repo_lock(rec.repo):
        head = await asyncio.to_thread(
            _ops.merge, Path(rec.repo), rec.branch, rec.into, squash=squash, message=message
        )
        tip = git.commit_of(Path(rec.repo), f"refs/heads/{rec.branch}")
        rec = await store.update_worktree(rec.job_id, info={**rec.info, "merged_tip": tip})
        rec = await set_state(store, rec, WorktreeState.MERGED)
    how = "squashed" if squash else "merged"
    await _log(store, rec, "merged", f"{how} into {rec.into}, now at {head}")
    return {"job_id": rec.job_id, "into": rec.into, "head": head, "squash": squash}


async def remove(store: Store, ref: str, *, force: bool = False) -> dict[str, Any]:
    """Remove the worktree and its branch: only when clean and merged, unless
    ``force`` (then the discarded commits are returned, and logged)."""
    rec = await resolve(store, ref)
    _check_idle(rec, "remove")
    async with repo_lock(rec.repo):
        st = await _status(rec)
        lost = await asyncio.to_thread(
            _ops.remove,
            Path(rec.repo),
            Path(rec.path),
            rec.branch,
            st,
            force=force,
            copied=copied_of(rec),
        )
        rec = await set_state(store, rec, WorktreeState.REMOVED)
    detail = f"discarded {len(lost)} commit(s): {'; '.join(lost)}" if lost else "clean and merged"
    await _log(store, rec, "removed", detail)
    return {"job_id": rec.job_id, "discarded": lost, "dirty_discarded": st.dirty if force else 0}


async def prune(store: Store) -> dict[str, Any]:
    """Remove every idle worktree that is clean and merged (or whose folder is gone);
    keep the rest and say why. Runs ``git worktree prune`` in each repository."""
    removed, kept = [], []
    for rec in await store.list_worktrees():
        if rec.state in (WorktreeState.REMOVED, WorktreeState.LOCKED):
            continue
        try:
            await remove(store, rec.job_id)
            removed.append(rec.job_id)
        except (UnmergedWorkError, WorktreeError) as exc:
            kept.append({"job_id": rec.job_id, "reason": str(exc)})
    for repo in {r.repo for r in await store.list_worktrees()}:
        if await asyncio.to_thread(Path(repo).is_dir):
            await asyncio.to_thread(git.run, Path(repo), "worktree", "prune", check=False)
    return {"removed": removed, "kept": kept}


async def _log(store: Store, rec: WorktreeRecord, action: str, detail: str) -> None:
    """The event goes to the session of the job that made the worktree."""
    try:
        job = await store.get_job(rec.job_id)
    except Exception:
        return
    await emit(store, job, rec, action, detail)


async def report_orphans(store: Store, config: ChorusConfig) -> list[str]:
    """At daemon start: records whose folder is gone (marked ``missing``, branch
    kept) and worktrees under the root that no record owns. Reported (logged and
    returned), never deleted; never raises, the daemon must start regardless."""
    try:
        return await _orphans(store, config)
    except Exception:
        log.exception("could not check worktrees for orphans")
        return []


async def _orphans(store: Store, config: ChorusConfig) -> list[str]:
    found: list[str] = []
    here = node_host(config)  # another host's folders are not ours to check
    records = [r for r in await store.list_worktrees() if r.info.get("host", here) == here]
    for rec in records:
        if rec.state in (WorktreeState.REMOVED, WorktreeState.MISSING):
            continue
        if not await asyncio.to_thread(Path(rec.path).is_dir):
            await set_state(store, rec, WorktreeState.MISSING)
            found.append(f"job {rec.job_id}: folder {rec.path} is gone; branch {rec.branch} kept")
    found += await asyncio.to_thread(_unrecorded, records, worktrees_root(config.worktree))
    for line in found:
        log.warning("orphaned worktree: %s", line)
    return found


def _unrecorded(records: list[WorktreeRecord], root: Path) -> list[str]:
    """Worktrees git lists under our root that no live record owns."""
    owned = {r.path for r in records if r.state != WorktreeState.REMOVED}
    out: list[str] = []
    for repo in {r.repo for r in records if Path(r.repo).is_dir()}:
        try:
            listed_here = git.worktrees(Path(repo))
        except GitError as exc:
            out.append(f"{repo}: cannot list its worktrees ({exc})")
            continue
        for listed in listed_here:
            inside = root in listed.path.parents
            if inside and str(listed.path) not in owned:
                out.append(f"{listed.path} (branch {listed.branch}) has no Chorus record")
    return out
