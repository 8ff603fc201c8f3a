"""One running job's object: failover bookkeeping and credit, budget stops, control.

A real store and supervisor; no body is started (a test that needed one would fail:
the supervisor's session hub is not running)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from chorus.config import BudgetConfig, load_config
from chorus.daemon import Supervisor
from chorus.daemon._job_run import JobRun, active_body
from chorus.daemon._outcomes import JobEnd, JobSucceeded
from chorus.events import ErrorCode, JobEnded, Notice, TurnFailed
from chorus.store import JobRecord, Redactor, SessionRecord, SqliteStore


@pytest.fixture
async def sup(chorus_home: Path) -> AsyncIterator[Supervisor]:
    async with SqliteStore(redactor=Redactor()) as store:
        yield Supervisor(store, load_config())


async def claimed(sup: Supervisor, tmp_path: Path) -> tuple[JobRecord, SessionRecord]:
    session = await sup.store.create_session("claude", cwd=str(tmp_path))
    await sup.queue.add("do it", session, {})
    async with sup.queue.lock:
        job = await sup.queue.claim()
    assert job is not None
    return job, session


async def test_a_failover_moves_the_session_and_the_jobs_record(
    sup: Supervisor, tmp_path: Path
) -> None:
    job, session = await claimed(sup, tmp_path)
    run = JobRun(sup, job)
    await run.move_to(session, "claude", "codex")
    assert run.failed_over_from == ["claude"]
    assert (await sup.store.get_job(job.id)).body == "codex"  # `chorus jobs` names it
    assert active_body(await sup.store.get_session(session.id)) == "codex"
    await run.move_to(session, "codex", "claude")  # waited for a reset: back on claude
    assert run.failed_over_from == ["claude", "codex"]
    assert run.job.body == "claude"


async def test_the_end_credits_the_body_it_ended_on(sup: Supervisor, tmp_path: Path) -> None:
    job, session = await claimed(sup, tmp_path)
    ends: list[JobEnd] = []

    async def seen(end: JobEnd) -> None:
        ends.append(end)

    sup.outcomes.on_end(seen)
    run = JobRun(sup, job)
    await run.move_to(session, "claude", "codex")
    run.body = "codex"
    await sup._end(job, "succeeded", None, result="done", run=run)
    stored = await sup.store.get_job(job.id)
    assert stored.body == "codex"
    assert stored.result == {"text": "done", "failed_over_from": ["claude"]}
    assert sup.failed_over_from(stored) == ["claude"]
    ended = [e for e in await sup.store.read_events(session.id) if isinstance(e, JobEnded)]
    assert [(e.body, e.failed_over_from) for e in ended] == [("codex", ["claude"])]
    assert [type(e) for e in ends] == [JobSucceeded]
    assert (ends[0].body, ends[0].failed_over_from) == ("codex", ("claude",))


async def test_a_job_that_never_moved_names_no_other_body(sup: Supervisor, tmp_path: Path) -> None:
    job, _session = await claimed(sup, tmp_path)
    run = JobRun(sup, job)
    run.body = "claude"
    await sup._end(job, "failed", None, result=None, run=run)
    stored = await sup.store.get_job(job.id)
    assert (stored.body, stored.result, sup.failed_over_from(stored)) == ("claude", None, [])


async def test_over_its_budget_the_job_stops_before_any_body_starts(
    sup: Supervisor, tmp_path: Path
) -> None:
    sup.config = sup.config.model_copy(update={"budget": BudgetConfig(per_job_usd=0.5)})
    job, session = await claimed(sup, tmp_path)
    sup.ledger.jobs[job.id] = 0.75
    final = await JobRun(sup, job).direct("go on")
    assert isinstance(final, TurnFailed)
    assert final.error.code == ErrorCode.BUDGET_EXCEEDED
    notices = [e for e in await sup.store.read_events(session.id) if isinstance(e, Notice)]
    assert [(n.kind, n.job_id) for n in notices] == [("budget", job.id)]
    assert "per_job_usd" in notices[0].message


async def test_an_interrupt_before_the_body_is_there_is_kept_for_its_turn(
    sup: Supervisor, tmp_path: Path
) -> None:
    """No session yet (the body still starts): the interrupt is taken and kept, so
    the job ends as soon as the body is there, before its turn begins."""
    job, _ = await claimed(sup, tmp_path)
    run = JobRun(sup, job)
    assert await run.interrupt() is True
    assert run.interrupted is True
    assert await sup.interrupt(job.id) == "not running (running)"  # no run registered here
