"""``[budget]``: what the bodies spent today and per job, and the check
that stops a job before it would spend past a limit.

The ledger counts the cost of each model request the meter saw (``metered`` events,
``chorus.meter``), and for a job the meter did not see (the meter off, a CLI it
cannot point) the cost its completed turns report (a body that reports none counts
as free): never both for one job. It is loaded for today from the log at start,
then fed every event as it is written, and each metered request the moment its
usage is read (so the next request meets a current budget). The meter asks
:func:`refusal` before each model request, and the supervisor before each attempt of
a job (its first, a failover, a restart); over a limit the job ends ``failed`` with
``budget_exceeded``, a notice in its log and a desktop notification.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from chorus.config import BudgetConfig
from chorus.events import ErrorCode, ErrorInfo, Event, JobEnded, Metered, TurnCompleted
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
    #: Jobs one of whose model requests the meter refused, and why.
    refused: dict[str, str] = field(default_factory=dict)
    #: Jobs (a session, for requests outside a job) whose spend the meter counts.
    _metered: set[str] = field(default_factory=set)
    #: The metered requests counted (the meter's own report and the log's copy).
    _seen: set[str] = field(default_factory=set)

    def observe(self, event: Event) -> None:
        if isinstance(event, Metered):
            self._observe_metered(event)
        elif isinstance(event, TurnCompleted) and event.cost_usd and not self._is_metered(event):
            self._add(event, event.cost_usd)
        elif isinstance(event, JobEnded) and event.job_id:
            self._forget(event.job_id)

    def _forget(self, job_id: str) -> None:
        """An ended job spends no more: drop its entries (a long-running daemon would
        otherwise keep one per job it ever ran)."""
        self.jobs.pop(job_id, None)
        self.refused.pop(job_id, None)
        self._metered.discard(job_id)

    def _is_metered(self, event: Event) -> bool:
        return (event.job_id or event.session_id) in self._metered

    def _observe_metered(self, event: Metered) -> None:
        self._roll(event.ts)
        if event.request_id in self._seen:
            return
        self._seen.add(event.request_id)
        self._metered.add(event.job_id or event.session_id)
        if event.cost_usd:
            self._add(event, event.cost_usd)

    def _add(self, event: Event, cost: float) -> None:
        self._roll(event.ts)
        if day_of(event.ts) == self.day:
            self.total += cost
            self.bodies[event.body] = self.bodies.get(event.body, 0.0) + cost
        if event.job_id:
            self.jobs[event.job_id] = self.jobs.get(event.job_id, 0.0) + cost

    def _roll(self, now: float) -> None:
        if day_of(now) > self.day:
            self.day, self.total, self.bodies = day_of(now), 0.0, {}
            self._seen.clear()

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
