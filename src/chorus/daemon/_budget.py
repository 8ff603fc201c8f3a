"""``[budget]`` (issue 26): what the bodies spent today and per job, and the check
that stops a job before it would spend past a limit.

The ledger counts the cost each completed turn reports (bodies that report none
count as free), from the log: loaded for today at start, then fed every event as
it is written. Before each attempt of a job (its first, a failover, a restart),
the supervisor asks :func:`refusal`; over a limit the job ends ``failed`` with
``budget_exceeded``, a notice in its log and a desktop notification.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from chorus.config import BudgetConfig
from chorus.events import ErrorCode, ErrorInfo, Event, TurnCompleted
from chorus.store import Store


def day_of(ts: float) -> str:
    return time.strftime("%Y-%m-%d", time.localtime(ts))


def midnight(ts: float) -> float:
    local = time.localtime(ts)
    return time.mktime((local.tm_year, local.tm_mon, local.tm_mday, 0, 0, 0, 0, 0, -1))


@dataclass
class Ledger:
    """Spend of the current local day (all bodies, per body) and per job."""

    day: str = field(default_factory=lambda: day_of(time.time()))
    total: float = 0.0
    bodies: dict[str, float] = field(default_factory=dict)
    jobs: dict[str, float] = field(default_factory=dict)

    def observe(self, event: Event) -> None:
        if not isinstance(event, TurnCompleted) or not event.cost_usd:
            return
        self._roll(event.ts)
        if day_of(event.ts) == self.day:
            self.total += event.cost_usd
            self.bodies[event.body] = self.bodies.get(event.body, 0.0) + event.cost_usd
        if event.job_id:
            self.jobs[event.job_id] = self.jobs.get(event.job_id, 0.0) + event.cost_usd

    def _roll(self, now: float) -> None:
        if day_of(now) > self.day:
            self.day, self.total, self.bodies = day_of(now), 0.0, {}

    def today(self, now: float | None = None) -> dict[str, object]:
        self._roll(time.time() if now is None else now)
        return {"day": self.day, "usd": round(self.total, 6), "bodies": dict(self.bodies)}


def refusal(ledger: Ledger, limits: BudgetConfig, job_id: str, body: str) -> str | None:
    """Why the job may not spend more (a limit reached), or None."""
    ledger.today()
    spent = ledger.jobs.get(job_id, 0.0)
    if limits.per_job_usd is not None and spent >= limits.per_job_usd:
        return f"this job spent {usd(spent)} of its {usd(limits.per_job_usd)} (per_job_usd)"
    if limits.daily_usd is not None and ledger.total >= limits.daily_usd:
        return f"today's spend {usd(ledger.total)} reached {usd(limits.daily_usd)} (daily_usd)"
    cap = limits.bodies.get(body)
    used = ledger.bodies.get(body, 0.0)
    if cap is not None and used >= cap:
        return f"{body} spent {usd(used)} today of its {usd(cap)} ([budget.bodies] {body})"
    return None


def usd(amount: float) -> str:
    return f"${amount:.2f}" if amount >= 0.01 or amount == 0 else f"${amount:.4f}"


def budget_error(why: str) -> ErrorInfo:
    message = f"budget exceeded: {why}; raise it in [budget] (config.toml, then chorus reload)"
    return ErrorInfo(code=ErrorCode.BUDGET_EXCEEDED, message=message)


async def load_today(store: Store, ledger: Ledger, now: float | None = None) -> None:
    """Today's completed turns (and their jobs) from the log, into ``ledger``."""
    start = midnight(time.time() if now is None else now)
    for session in await store.list_sessions(limit=100_000):
        if session.updated_at < start:
            continue
        for event in await store.read_events(session.id):
            if event.ts >= start:
                ledger.observe(event)


Notify = Callable[[str, str], Awaitable[None]]
