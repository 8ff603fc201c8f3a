"""The scheduler on a clock the test sets, with a real store and supervisor: firings
are due by the store's rows (so a restart never fires twice), catch-up and
concurrency policies, manual runs, the heartbeat's no-model-call path."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from watchfiles import awatch

from chorus.routines import HEARTBEAT, Scheduler, heartbeat_path, routines_dir
from chorus.store import JobRecord, JobState, SqliteStore

if TYPE_CHECKING:
    from conftest import Rig


def write_routine(name: str, text: str) -> None:
    (routines_dir() / f"{name}.toml").write_text(text)


def utc(*parts: int) -> float:
    return datetime(*parts, tzinfo=UTC).timestamp()


def cron_routine(name: str, extra: str = "", schedule: str = "0 * * * *") -> None:
    write_routine(
        name,
        f'[routine]\nschedule = "{schedule}"\ntimezone = "Europe/Berlin"\n'
        f'model_preference = "claude"\n{extra}\n'
        '[routine.task]\nprompt = "report for {date}"\n',
    )


async def jobs_of(store: SqliteStore, name: str) -> list[JobRecord]:
    return [j for j in await store.list_jobs() if j.options.get("routine") == name]


async def test_a_due_cron_firing_queues_one_job_and_a_restart_does_not_repeat_it(rig: Rig) -> None:
    cron_routine("hourly")
    rig.clock.now = utc(2026, 7, 1, 9, 30)
    await rig.sched.tick()  # first sight: anchored now, nothing due yet
    assert await jobs_of(rig.store, "hourly") == []
    rig.clock.now = utc(2026, 7, 1, 10, 0, 5)
    await rig.sched.tick()
    await rig.sched.tick()
    (job,) = await jobs_of(rig.store, "hourly")
    assert job.prompt == "report for 2026-07-01"
    assert job.options["scheduled_for"] == utc(2026, 7, 1, 10)
    assert job.body == "claude"
    rig.restart()
    await rig.sched.tick()
    assert len(await jobs_of(rig.store, "hourly")) == 1
    await rig.store.update_job(job.id, state=JobState.RUNNING)
    await rig.store.update_job(job.id, state=JobState.SUCCEEDED)
    rig.clock.now = utc(2026, 7, 1, 11, 0, 1)
    await rig.sched.tick()
    assert len(await jobs_of(rig.store, "hourly")) == 2


async def _after_downtime(rig: Rig, extra: str) -> list[float]:
    cron_routine("r", extra + '\nconcurrency = "always_enqueue"')
    rig.clock.now = utc(2026, 7, 1, 9, 30)
    await rig.sched.tick()
    rig.clock.now = utc(2026, 7, 1, 14, 20)  # the daemon was down over 10:00 .. 14:00
    rig.restart()
    await rig.sched.tick()
    return [j.options["scheduled_for"] for j in await jobs_of(rig.store, "r")]


async def test_catch_up_run_latest_once_within_the_grace_window(rig: Rig) -> None:
    assert await _after_downtime(rig, 'catch_up_grace = "1h"') == [utc(2026, 7, 1, 14)]


async def test_catch_up_run_latest_once_outside_the_grace_window_records_a_miss(rig: Rig) -> None:
    assert await _after_downtime(rig, 'catch_up_grace = "10m"') == []
    (missed,) = await rig.store.list_firings("r")
    assert (missed.outcome, missed.scheduled_for) == ("missed", utc(2026, 7, 1, 14))
    rig.clock.now = utc(2026, 7, 1, 15, 0, 1)  # the schedule continues on time
    await rig.sched.tick()
    assert len(await jobs_of(rig.store, "r")) == 1


async def test_catch_up_skip_missed(rig: Rig) -> None:
    assert await _after_downtime(rig, 'catch_up = "skip_missed"') == []


async def test_catch_up_enqueue_missed_up_to_the_cap(rig: Rig) -> None:
    fired = await _after_downtime(rig, 'catch_up = "enqueue_missed"\ncatch_up_cap = 3')
    assert fired == [utc(2026, 7, 1, 12), utc(2026, 7, 1, 13), utc(2026, 7, 1, 14)]


async def _three_firings(rig: Rig, policy: str, *, run_first: bool) -> list[str]:
    write_routine(
        "tick",
        f'[routine]\nevery = "1m"\nconcurrency = "{policy}"\nmodel_preference = "claude"\n'
        '[routine.task]\nprompt = "p"\n',
    )
    rig.clock.now = 1_000_000.0
    await rig.sched.tick()
    for minute in (1, 2, 3):
        rig.clock.now = 1_000_000.0 + 60 * minute + 1
        await rig.sched.tick()
        if run_first and minute == 1:
            (first,) = await jobs_of(rig.store, "tick")
            await rig.store.update_job(first.id, state=JobState.RUNNING)
    return [f.outcome for f in reversed(await rig.store.list_firings("tick"))]


async def test_coalesce_if_active_keeps_one_follow_up_queued(rig: Rig) -> None:
    outcomes = await _three_firings(rig, "coalesce_if_active", run_first=True)
    assert outcomes == ["queued", "queued", "coalesced"]


async def test_skip_if_active_skips_while_a_job_is_queued_or_running(rig: Rig) -> None:
    assert await _three_firings(rig, "skip_if_active", run_first=False) == [
        "queued",
        "skipped",
        "skipped",
    ]


async def test_always_enqueue_queues_every_firing(rig: Rig) -> None:
    assert await _three_firings(rig, "always_enqueue", run_first=False) == ["queued"] * 3


async def test_a_manual_run_queues_a_job_carrying_the_routine_name(rig: Rig) -> None:
    write_routine("byhand", '[routine]\ntrigger = "manual"\n[routine.task]\nprompt = "p"\n')
    rig.clock.now = 2_000_000.0
    result = await rig.sched.run_now("byhand")
    assert result.outcome == "queued"
    assert result.job is not None
    assert result.job.options["routine"] == "byhand"
    (firing,) = await rig.store.list_firings("byhand")
    assert (firing.kind, firing.job_id) == ("manual", result.job.id)


async def test_an_invalid_routine_is_listed_and_the_others_still_fire(rig: Rig) -> None:
    cron_routine("good")
    cron_routine("bad", schedule="99 * * * *")
    rig.clock.now = utc(2026, 7, 1, 9, 30)
    await rig.sched.tick()
    rig.clock.now = utc(2026, 7, 1, 10, 0, 1)
    await rig.sched.tick()
    assert len(await jobs_of(rig.store, "good")) == 1
    rows = {row["name"]: row for row in await rig.sched.describe()}
    assert rows["bad"]["valid"] is False
    assert "routine.schedule" in rows["bad"]["error"]
    assert rows["good"]["next_fire"] == utc(2026, 7, 1, 11)
    assert rows["good"]["last"]["outcome"] == "queued"


async def test_a_disabled_routine_does_not_fire(rig: Rig) -> None:
    cron_routine("hourly")
    rig.clock.now = utc(2026, 7, 1, 9, 30)
    await rig.sched.tick()
    await rig.store.set_routine_enabled("hourly", False)
    rig.clock.now = utc(2026, 7, 1, 10, 0, 1)
    await rig.sched.tick()
    assert await jobs_of(rig.store, "hourly") == []


async def test_heartbeat_without_unchecked_items_queues_nothing(rig: Rig) -> None:
    heartbeat_path().write_text("# tasks\n- [x] done already\n")
    result = await rig.sched.run_now(HEARTBEAT)
    assert (result.outcome, result.job) == ("nothing_to_do", None)
    assert await rig.store.list_jobs() == []


async def test_heartbeat_with_an_unchecked_item_queues_one_job_listing_it(rig: Rig) -> None:
    heartbeat_path().write_text("- [x] feed the cat\n- [ ] water the plants\n")
    result = await rig.sched.run_now(HEARTBEAT)
    assert result.job is not None
    assert "- [ ] water the plants" in result.job.prompt
    assert "feed the cat" not in result.job.prompt
    session = await rig.store.get_session(result.job.session_id or "")
    assert Path(session.cwd or "") == heartbeat_path().parent


async def test_heartbeat_ticks_on_its_interval_and_respects_active_hours(
    rig: Rig, chorus_home: Path
) -> None:
    (chorus_home / "config.toml").write_text(
        '[routines]\ntimezone = "Europe/Berlin"\nheartbeat_interval = "30m"\n'
        'active_hours = "09:00-18:00"\n'
    )
    heartbeat_path().write_text("- [ ] something\n")
    rig.clock.now = utc(2026, 7, 1, 3, 0)  # 05:00 in Berlin
    await rig.sched.tick()
    rig.clock.now = utc(2026, 7, 1, 3, 30, 1)
    await rig.sched.tick()
    assert [f.outcome for f in await rig.store.list_firings(HEARTBEAT)] == ["outside_active_hours"]
    rig.clock.now = utc(2026, 7, 1, 7, 0, 1)  # 09:00 in Berlin, on a 30-minute step
    await rig.sched.tick()
    (latest, _) = await rig.store.list_firings(HEARTBEAT)
    assert latest.outcome == "queued"


async def test_a_degraded_watcher_is_shown_on_its_routine_and_still_fires(
    rig: Rig, tmp_path: Path
) -> None:
    def flaky(path: Path, **kw: Any) -> AsyncIterator[Any]:
        if not kw["force_polling"]:
            raise OSError(28, "inotify watch limit reached")
        return awatch(path, **kw)

    watched = tmp_path / "watched"
    watched.mkdir()
    write_routine(
        "onchange",
        f'[routine]\ntrigger = "file_change"\nwatch_path = "{watched}"\ndebounce = "300ms"\n'
        'model_preference = "claude"\n[routine.task]\nprompt = "changed {trigger_path}"\n',
    )
    rig.clock.now = time.time()
    sched = Scheduler(rig.sup, clock=rig.clock, poll_s=0.2, watch=flaky)
    task = asyncio.create_task(sched.run())
    try:
        await asyncio.sleep(1.0)
        (watched / "a.md").write_text("x")
        await asyncio.sleep(3.0)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    (job,) = await jobs_of(rig.store, "onchange")
    assert job.prompt == f'changed "{watched / "a.md"}"'
    (row,) = [r for r in await sched.describe() if r["name"] == "onchange"]
    assert "degraded to polling" in row["notice"]


def _change_routine(name: str, watched: Path, catch_up: str = "run_latest_once") -> None:
    write_routine(
        name,
        f'[routine]\ntrigger = "file_change"\nwatch_path = "{watched}"\ndebounce = "300ms"\n'
        f'catch_up = "{catch_up}"\nmodel_preference = "claude"\n'
        '[routine.task]\nprompt = "changed {trigger_path}"\n',
    )


async def _run_for(rig: Rig, seconds: float) -> Scheduler:
    sched = Scheduler(rig.sup, clock=rig.clock, poll_s=0.2)
    task = asyncio.create_task(sched.run())
    try:
        await asyncio.sleep(seconds)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    return sched


async def test_a_change_made_while_no_daemon_ran_fires_once_at_the_next_start(
    rig: Rig, tmp_path: Path
) -> None:
    notes = tmp_path / "notes.md"
    notes.write_text("first")
    _change_routine("notes", notes)
    rig.clock.now = time.time()
    await _run_for(rig, 1.0)  # the first watch only takes its snapshot
    assert await jobs_of(rig.store, "notes") == []
    notes.write_text("edited while the daemon was down")
    await _run_for(rig, 1.0)
    (job,) = await jobs_of(rig.store, "notes")
    assert job.prompt == f'changed "{notes}"'
    await _run_for(rig, 1.0)  # a third start sees nothing new
    assert len(await jobs_of(rig.store, "notes")) == 1


async def test_skip_missed_records_a_change_made_while_down_without_firing(
    rig: Rig, tmp_path: Path
) -> None:
    watched = tmp_path / "src"
    watched.mkdir()
    _change_routine("skipper", watched, catch_up="skip_missed")
    rig.clock.now = time.time()
    await _run_for(rig, 1.0)
    (watched / "new.py").write_text("x = 1\n")
    await _run_for(rig, 1.0)
    assert await jobs_of(rig.store, "skipper") == []
    assert [f.outcome for f in await rig.store.list_firings("skipper")] == ["missed"]


async def test_a_disabled_routine_shows_no_next_fire(rig: Rig) -> None:
    cron_routine("hourly")
    rig.clock.now = utc(2026, 7, 1, 9, 30)
    await rig.sched.tick()
    (row,) = [r for r in await rig.sched.describe() if r["name"] == "hourly"]
    assert row["next_fire"] == utc(2026, 7, 1, 10)
    await rig.store.set_routine_enabled("hourly", False)
    (row,) = [r for r in await rig.sched.describe() if r["name"] == "hourly"]
    assert (row["enabled"], row["next_fire"]) == (False, None)
