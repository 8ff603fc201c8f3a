"""What the dashboard changes, each through the same public function the daemon's
API and the CLI use: a new job (:meth:`Supervisor.submit`), a worktree job's
merge and discard (:func:`chorus.worktrees.merge` / ``remove``), and the diff of
what a job wrote (:func:`chorus.worktrees.diff`, else the job's own events)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from chorus._errors import UserError
from chorus._json_input import BadJsonError
from chorus.dashboard._changes import diff_from_events
from chorus.dashboard._render import MAX_DIFF_LINES, diff_html
from chorus.store import JobRecord, Store, WorktreeRecord

if TYPE_CHECKING:
    from chorus.jobs import JobPort

_TEXT_FIELDS = ("prompt", "body", "cwd", "permission_mode", "framework")


def _text(payload: dict[str, Any], name: str) -> str | None:
    value = payload.get(name)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise BadJsonError(f"{name!r} must be a string")
    return value.strip() or None


def _choice(value: str | None, allowed: tuple[str, ...], what: str) -> str | None:
    if value is not None and value not in allowed:
        raise UserError(f"unknown {what} {value!r}: one of {', '.join(allowed)}")
    return value


async def new_job(sup: JobPort, payload: dict[str, Any]) -> JobRecord:
    """Queue the job the form describes, checked as ``POST /jobs`` checks it."""
    from chorus._limits import prompt_problem
    from chorus.bodies import body_names
    from chorus.frameworks import FRAMEWORKS
    from chorus.jobs import JobRequest
    from chorus.policy import PERMISSION_MODES

    fields = {name: _text(payload, name) for name in _TEXT_FIELDS}
    prompt = fields.pop("prompt") or ""
    problem = prompt_problem(prompt, sup.config.daemon.max_prompt_bytes)
    if problem is not None:
        raise UserError(problem)
    _choice(fields["body"], tuple(body_names(sup.config)), "body")
    _choice(fields["permission_mode"], PERMISSION_MODES, "permission mode")
    _choice(fields["framework"], FRAMEWORKS, "framework")
    if not fields["cwd"]:
        raise UserError("choose the folder the job works in")
    worktree = payload.get("worktree")
    if worktree is not None and not isinstance(worktree, bool):
        raise BadJsonError("'worktree' must be true or false")
    request = JobRequest(
        prompt,
        body=fields["body"],
        cwd=fields["cwd"],
        permission_mode=fields["permission_mode"],
        framework=fields["framework"],
        worktree=worktree,
    )
    return await sup.submit(request)


async def _worktree_of(store: Store, job_id: str) -> WorktreeRecord | None:
    found = [r for r in await store.list_worktrees() if r.job_id == job_id]
    return found[0] if found else None


async def changes(store: Store, job: JobRecord) -> dict[str, Any]:
    """The job's diff, file by file, coloured: its worktree's, else its events'."""
    from chorus import worktrees

    rec = await _worktree_of(store, job.id)
    if rec is not None and rec.state != "removed":
        text = await worktrees.diff(store, job.id)
        info = await worktrees.describe(rec)
        source = "worktree"
    else:
        events = await store.read_events(job.session_id) if job.session_id else []
        cwd = await _cwd_of(store, job)
        text = diff_from_events((e for e in events if e.job_id == job.id), cwd)
        info, source = None, "events"
    files = await asyncio.to_thread(diff_html, text)
    return {
        "source": source,
        "files": files,
        "truncated": text.count("\n") > MAX_DIFF_LINES,
        "worktree": _brief(info) if info else None,
    }


def _brief(info: dict[str, Any]) -> dict[str, Any]:
    keys = ("state", "branch", "into", "ahead", "behind", "dirty", "exists", "error")
    return {k: info.get(k) for k in keys}


async def _cwd_of(store: Store, job: JobRecord) -> str | None:
    if not job.session_id:
        return None
    return (await store.get_session(job.session_id)).cwd


async def merge(store: Store, job: JobRecord, squash: bool) -> dict[str, Any]:
    """Merge the job's branch back, as ``chorus worktree merge`` does."""
    from chorus import worktrees

    return await worktrees.merge(store, job.id, squash=squash)


async def discard(store: Store, job: JobRecord) -> dict[str, Any]:
    """Remove the job's worktree and branch with its unmerged work, as
    ``chorus worktree rm --force`` does (the discarded commits are logged)."""
    from chorus import worktrees

    return await worktrees.remove(store, job.id, force=True)
