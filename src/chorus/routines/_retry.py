"""The retry queue: a job that failed on quota or a transient error is queued again
after a backoff, at most ``[retry] max_retries`` times.

It is a supervisor outcome hook (:meth:`RetryQueue.on_outcome`) plus a due-check
the scheduler runs each tick (:meth:`RetryQueue.tick`). Pending retries live in
``CHORUS_HOME/retry-queue.json`` (written atomically), so a restarted daemon
keeps them. A retry moves the *same* job from ``failed`` back to ``queued``: its
session resumes natively and its history stays in one place. The supervisor has
already failed over where another body was healthy; on quota the retry waits at
least until the earliest provider reset.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from chorus.config import RetryConfig, chorus_home
from chorus.events import ErrorCode, ErrorInfo, JobEnded
from chorus.jobs import JobPort
from chorus.store import JobRecord, JobState, JobStateError, UnknownJobError

log = logging.getLogger("chorus.routines")

_TRANSIENT = frozenset(
    {
        ErrorCode.RATE_LIMITED,
        ErrorCode.QUOTA_EXHAUSTED,
        ErrorCode.OVERLOADED,
        ErrorCode.SERVER_ERROR,
        ErrorCode.NETWORK,
        ErrorCode.TIMEOUT,
    }
)
_QUOTA = frozenset({ErrorCode.RATE_LIMITED, ErrorCode.QUOTA_EXHAUSTED})


def is_retryable(error: ErrorInfo) -> bool:
    """Quota, rate limits and transient failures; never auth, policy, bad requests or
    an interrupt by the user."""
    return error.code in _TRANSIENT or (error.retryable and error.code != ErrorCode.INTERRUPTED)


def backoff_s(retry: int, config: RetryConfig) -> float:
    """Delay before retry number ``retry`` (1-based): doubling from ``base_s``."""
    return float(min(config.max_s, config.base_s * 2 ** (retry - 1)))


@dataclass(frozen=True, slots=True)
class PendingRetry:
    job_id: str
    due_at: float
    retry: int
    reason: str


class RetryQueue:
    """Pending retries of failed jobs. Register :meth:`on_outcome` in
    the job port's ``outcomes`` (each job's end) and call :meth:`tick` periodically."""

    def __init__(
        self,
        sup: JobPort,
        *,
        clock: Callable[[], float] = time.time,
        path: Path | None = None,
    ) -> None:
        self.sup = sup
        self.clock = clock
        self.path = path or chorus_home() / "retry-queue.json"
        self.pending: dict[str, PendingRetry] = _load(self.path)

    @property
    def config(self) -> RetryConfig:
        return self.sup.config.retry

    async def on_outcome(self, job: JobRecord, ended: JobEnded) -> None:
        """Schedule a retry of a job that failed retryably, within ``max_retries``."""
        if ended.state != "failed" or ended.error is None or not is_retryable(ended.error):
            return
        retry = job.attempts  # claims so far: the first run plus the retries before
        if retry > self.config.max_retries:
            log.info("job %s failed %d times; no more retries", job.id, job.attempts)
            return
        due = self.clock() + max(backoff_s(retry, self.config), ended.error.retry_after_s or 0)
        if ended.error.code in _QUOTA:
            due = max(due, self._earliest_reset())
        self.pending[job.id] = PendingRetry(job.id, due, retry, str(ended.error.code))
        self._save()

    def _earliest_reset(self) -> float:
        keys = [self.sup.provider_key(b) for b in self.sup.router.bodies]
        return self.sup.health.earliest_reset(keys) if keys else 0.0

    async def tick(self) -> None:
        """Queue every retry that is due (a job no longer ``failed`` is dropped)."""
        now = self.clock()
        for entry in [p for p in self.pending.values() if p.due_at <= now]:
            self.pending.pop(entry.job_id)
            try:
                await self.sup.store.update_job(entry.job_id, state=JobState.QUEUED)
                log.info("retrying job %s (retry %d, %s)", entry.job_id, entry.retry, entry.reason)
            except (JobStateError, UnknownJobError):
                pass  # retried or removed meanwhile
        self._save()

    def status(self) -> dict[str, int]:
        return {"pending_retries": len(self.pending)}

    def _save(self) -> None:
        tmp = self.path.with_name(f".{self.path.name}.tmp")
        tmp.write_text(json.dumps([asdict(p) for p in self.pending.values()]))
        os.replace(tmp, self.path)


def _load(path: Path) -> dict[str, PendingRetry]:
    try:
        rows = json.loads(path.read_text())
        return {row["job_id"]: PendingRetry(**row) for row in rows}
    except (OSError, ValueError, TypeError, KeyError):
        return {}
