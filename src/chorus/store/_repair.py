"""Start-up repair: what a crash between two writes of an older Chorus (or between a
commit and its mirror write) can leave behind.

* a terminal job whose log has no ``JobEnded``: its followers (``chorus watch``)
  would wait forever, so the missing end is appended from the job's own row;
* a JSONL mirror behind (or ahead of) the log: it is rebuilt from the log.

Run it once after :meth:`Store.start` and before anything is scheduled; it is
idempotent (a second run finds nothing).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from chorus.events import ErrorCode, ErrorInfo, JobEnded
from chorus.store._interface import Store
from chorus.store._records import ORIGIN_CHORUS, JobRecord

log = logging.getLogger("chorus.store")


@dataclass(frozen=True, slots=True)
class RepairReport:
    """What :func:`repair_store` fixed: job ids given their end, sessions re-mirrored."""

    ended_jobs: list[str] = field(default_factory=list)
    rebuilt_mirrors: list[str] = field(default_factory=list)


async def repair_store(store: Store) -> RepairReport:
    """Append the missing ``JobEnded`` events, then rebuild stale mirrors."""
    ended = [await _append_end(store, job) for job in await store.jobs_missing_end()]
    stale = await store.stale_mirrors()
    for session_id in stale:
        await store.rebuild_mirror(session_id)
    if ended or stale:
        log.warning(
            "store repair: %d job(s) given their missing end, %d mirror(s) rebuilt",
            len(ended),
            len(stale),
        )
    return RepairReport(ended_jobs=ended, rebuilt_mirrors=stale)


async def _append_end(store: Store, job: JobRecord) -> str:
    ended = JobEnded(
        job_id=job.id,
        state=str(job.state),
        result=_result_text(job),
        error=_error_info(job),
        attempts=max(job.attempts, 1),
    )
    await store.append(job.session_id or "", ended, origin=ORIGIN_CHORUS)
    return job.id


def _result_text(job: JobRecord) -> str | None:
    text = (job.result or {}).get("text")
    return text if isinstance(text, str) else None


def _error_info(job: JobRecord) -> ErrorInfo | None:
    if job.error is None:
        return None
    try:
        return ErrorInfo.model_validate(job.error)
    except ValueError:
        return ErrorInfo(code=ErrorCode.UNKNOWN, message=str(job.error.get("message", "")))
