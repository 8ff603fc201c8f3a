"""What the pages show, gathered from the store: job rows with a live status, the
cost of each job, the board of flags and approvals."""

from __future__ import annotations

import time
from typing import Any

from chorus.events import TurnCompleted
from chorus.flags import BoardItem, live_status
from chorus.store import JOB_TERMINAL, JobRecord, Store, WorktreeRecord


class CostBook:
    """Each job's cost (the sum of its turns' ``cost_usd``), read from the log once
    the job has ended and again on each call while it runs."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._ended: dict[str, float | None] = {}

    async def cost(self, job: JobRecord) -> float | None:
        if job.id in self._ended:
            return self._ended[job.id]
        total = await self._sum(job)
        if job.state in JOB_TERMINAL:
            self._ended[job.id] = total
        return total

    async def _sum(self, job: JobRecord) -> float | None:
        if not job.session_id:
            return None
        costs = [
            e.cost_usd
            for e in await self.store.read_events(job.session_id)
            if isinstance(e, TurnCompleted) and e.job_id == job.id and e.cost_usd is not None
        ]
        return round(sum(costs), 6) if costs else None


async def job_rows(
    store: Store, pending: list[BoardItem], costs: CostBook, *, limit: int = 200
) -> list[dict[str, Any]]:
    """The newest ``limit`` jobs as the jobs page shows them."""
    jobs = sorted(await store.list_jobs(), key=lambda j: j.created_at, reverse=True)[:limit]
    return [await _row(job, pending, costs) for job in jobs]


async def _row(job: JobRecord, pending: list[BoardItem], costs: CostBook) -> dict[str, Any]:
    end = job.ended_at or time.time()
    return {
        "id": job.id,
        "status": live_status(job, pending),
        "state": str(job.state),
        "body": job.body,
        "body_name": friendly(job.body),
        "session_id": job.session_id,
        "prompt": job.prompt[:160],
        "created_at": job.created_at,
        "duration_s": round(end - job.started_at, 1) if job.started_at else None,
        "cost_usd": await costs.cost(job),
        "error": job.error,
        "flags": sum(1 for item in pending if item.job_id == job.id),
    }


#: The names people know the bodies by.
FRIENDLY = {
    "claude": "Claude Code",
    "claude-print": "Claude Code (one-shot)",
    "codex": "Codex",
    "codex-exec": "Codex (one-shot)",
    "gemini": "Gemini CLI",
    "gemini-headless": "Gemini CLI (one-shot)",
    "claude-code-acp": "Claude Code over ACP",
    "codex-acp": "Codex over ACP",
}


def friendly(body: str | None) -> str:
    return FRIENDLY.get(body or "", body or "router")


def _account(key: str) -> str:
    account = key.split("@", 1)[1] if "@" in key else "default"
    return "own login" if account == "default" else "API key"


def _provider(body: str, rows: list[dict[str, Any]], why: str | None, now: float) -> dict[str, Any]:
    """One body's health as the providers page shows it (no key fingerprints)."""
    mine = [r for r in rows if r["key"].split("@")[0] == body]
    outcomes = [o for r in mine for o in r.get("outcomes") or []]
    cooldown = max((float(r.get("cooldown_until") or 0) for r in mine), default=0.0)
    states = {str(r.get("quota_state") or "ok") for r in mine} - {"ok"}
    errors = [r["last_error"] for r in mine if r.get("last_error")]
    return {
        "body": body,
        "name": friendly(body),
        "accounts": sorted({_account(r["key"]) for r in mine}) or ["own login"],
        "ok": sum(outcomes),
        "runs": len(outcomes),
        "cooldown_s": max(0.0, cooldown - now),
        "quota": ", ".join(sorted(states)) or "ok",
        "last_error": errors[-1] if errors else None,
        "unready": why,
    }


def provider_rows(
    rows: list[dict[str, Any]], bodies: list[str], unready: dict[str, str], now: float
) -> list[dict[str, Any]]:
    """Each routed body (and any other with health data), friendly-named."""
    names = list(bodies) + [
        b for b in dict.fromkeys(r["key"].split("@")[0] for r in rows) if b not in bodies
    ]
    return [_provider(name, rows, unready.get(name), now) for name in names]


async def spend_by_body(store: Store, costs: CostBook, since: float) -> dict[str, float]:
    """What each body's jobs cost since ``since`` (from their turns)."""
    out: dict[str, float] = {}
    for job in await store.list_jobs():
        if job.created_at < since:
            continue
        cost = await costs.cost(job)
        if cost:
            out[job.body or "-"] = round(out.get(job.body or "-", 0.0) + cost, 6)
    return out


async def recent_folders(store: Store, limit: int = 8) -> list[str]:
    """The folders jobs ran in lately (a worktree job's repository, not its copy)."""
    repos = {r.path: r.repo for r in await store.list_worktrees()}
    folders: list[str] = []
    for session in await store.list_sessions(limit=200):
        folder = repos.get(session.cwd or "", session.cwd)
        if folder and folder not in folders:
            folders.append(folder)
    return folders[:limit]


async def job_live(store: Store, job_id: str, pending: list[BoardItem]) -> dict[str, Any]:
    """A job's live state for its page: the same status ``chorus jobs`` shows, what
    waits on a person, its worktree's state and the jobs that followed it."""
    job = await store.get_job(job_id)
    later = [
        {"id": j.id, "prompt": j.prompt[:80], "state": str(j.state)}
        for j in await store.list_jobs()
        if j.session_id == job.session_id and j.created_at > job.created_at and j.id != job.id
    ]
    worktree = [r for r in await store.list_worktrees() if r.job_id == job.id]
    return {
        "status": live_status(job, pending),
        "state": str(job.state),
        "finished": job.state in JOB_TERMINAL,
        "error": job.error,
        "pending": [i.to_json() for i in pending if i.job_id == job.id],
        "followups": sorted(later, key=lambda j: j["id"]),
        "worktree": _worktree_brief(worktree[0]) if worktree else None,
    }


def _worktree_brief(rec: WorktreeRecord) -> dict[str, Any]:
    return {"state": str(rec.state), "branch": rec.branch, "into": rec.into}
