"""What happens to jobs, as typed outcome events for whoever subscribes.

The supervisor publishes one :class:`JobStarted` when a job is claimed, one
:class:`JobFailedOver` each time it moves to another body, and one end
(:class:`JobSucceeded`, :class:`JobFailed` or :class:`JobCancelled`, all
:class:`JobEnd`) once its :class:`~chorus.events.JobEnded` is stored.
Subscribers (notifications, routine retries, teams, memory extraction) are called
in order; one that raises is logged and the others still run.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

from chorus.events import Handoff, JobEnded
from chorus.store import JobRecord

log = logging.getLogger("chorus.daemon")


@dataclass(frozen=True, slots=True)
class JobStarted:
    """This node claimed the job and starts running it."""

    job: JobRecord


@dataclass(frozen=True, slots=True)
class JobFailedOver:
    """The job moved from one body to another (``handoff`` says which and why)."""

    job: JobRecord
    handoff: Handoff


@dataclass(frozen=True, slots=True)
class JobEnd:
    """The job ended for good; ``ended`` is its stored last event. ``body`` is the body
    credited with the outcome (the last it ran on), ``failed_over_from`` the bodies it
    left before, in order."""

    job: JobRecord
    ended: JobEnded
    body: str | None = None
    failed_over_from: tuple[str, ...] = field(default=())


@dataclass(frozen=True, slots=True)
class JobSucceeded(JobEnd):
    """The job's last turn completed."""


@dataclass(frozen=True, slots=True)
class JobFailed(JobEnd):
    """The job failed (``ended.error`` says why)."""


@dataclass(frozen=True, slots=True)
class JobCancelled(JobEnd):
    """The job was cancelled while queued or interrupted while it ran."""


Outcome = JobStarted | JobFailedOver | JobEnd
_ENDS: dict[str, type[JobEnd]] = {
    "succeeded": JobSucceeded,
    "failed": JobFailed,
    "cancelled": JobCancelled,
}

OutcomeT = TypeVar("OutcomeT", JobStarted, JobFailedOver, JobEnd)
Handler = Callable[[OutcomeT], Awaitable[None]]


def job_end(
    job: JobRecord, ended: JobEnded, body: str | None, failed_over_from: tuple[str, ...] = ()
) -> JobEnd:
    """The outcome event for ``ended`` (its state picks the class)."""
    return _ENDS.get(ended.state, JobEnd)(job, ended, body, failed_over_from)


class Outcomes:
    """Typed job outcomes, delivered to subscribers by type (a subscriber to
    :class:`JobEnd` gets every end)."""

    def __init__(self) -> None:
        self._subscribers: list[tuple[type[Outcome], Callable[[Outcome], Awaitable[None]]]] = []

    def subscribe(self, kind: type[OutcomeT], handler: Handler[OutcomeT]) -> None:
        """Call ``handler`` with every published outcome of type ``kind``."""
        self._subscribers.append((kind, handler))  # type: ignore[arg-type]

    def on_end(self, handler: Handler[JobEnd]) -> None:
        """``subscribe(JobEnd, handler)``, for packages that do not import this one."""
        self.subscribe(JobEnd, handler)

    def on_failover(self, handler: Handler[JobFailedOver]) -> None:
        """``subscribe(JobFailedOver, handler)``."""
        self.subscribe(JobFailedOver, handler)

    async def publish(self, outcome: Outcome) -> None:
        """Deliver ``outcome`` to its subscribers in order; failures are logged."""
        for kind, handler in list(self._subscribers):
            if not isinstance(outcome, kind):
                continue
            try:
                await handler(outcome)
            except Exception:
                log.exception("outcome subscriber failed on %s", type(outcome).__name__)
