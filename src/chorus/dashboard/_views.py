"""What the pages show, gathered from the store: job rows with a live status, the
cost of each job, the board of flags and approvals."""

from __future__ import annotations

import time
from typing import Any

from chorus.events import TurnCompleted
from chorus.flags import BoardItem, live_status
from chorus.store import JOB_TERMINAL, JobRecord, Store


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
        "session_id": job.session_id,
        "prompt": job.prompt[:160],
        "created_at": job.created_at,
        "duration_s": round(end - job.started_at, 1) if job.started_at else None,
        "cost_usd": await costs.cost(job),
        "error": job.error,
        "flags": sum(1 for item in pending if item.job_id == job.id),
    }
