"""Routine state and firings: a firing and its job are written together, once."""

from __future__ import annotations

import pytest

from chorus.store import (
    Firing,
    FiringExistsError,
    JobState,
    Store,
    UnknownSessionError,
)


async def test_a_firing_and_its_job_are_written_together_and_only_once(store: Store) -> None:
    firing = Firing("daily", 1_800_000_000.0001, kind="schedule", detail={"x": 1})
    job = await store.create_fired_job(firing, "do it", body="claude", options={"model": None})
    assert job.state == JobState.QUEUED
    assert job.options == {"model": None, "routine": "daily", "scheduled_for": 1_800_000_000.0}
    with pytest.raises(FiringExistsError):
        await store.create_fired_job(Firing("daily", 1_800_000_000.0), "again")
    with pytest.raises(FiringExistsError):
        await store.record_firing(Firing("daily", 1_800_000_000.0), "skipped")
    assert [j.id for j in await store.list_jobs()] == [job.id]
    (rec,) = await store.list_firings("daily")
    assert (rec.outcome, rec.job_id, rec.job_state, rec.detail) == (
        "queued",
        job.id,
        JobState.QUEUED,
        {"x": 1},
    )


async def test_a_failed_job_insert_leaves_no_firing(store: Store) -> None:
    with pytest.raises(UnknownSessionError):
        await store.create_fired_job(Firing("daily", 10.0), "p", session_id="nope")
    assert await store.list_firings("daily") == []
    assert await store.list_jobs() == []


async def test_firings_list_latest_first_with_outcomes(store: Store) -> None:
    await store.record_firing(Firing("r", 10.0), "missed")
    await store.create_fired_job(Firing("r", 30.0), "p")
    await store.record_firing(Firing("r", 20.0, kind="manual"), "coalesced")
    await store.record_firing(Firing("other", 40.0), "skipped")
    got = [(f.scheduled_for, f.outcome, f.kind) for f in await store.list_firings("r")]
    assert got == [
        (30.0, "queued", "schedule"),
        (20.0, "coalesced", "manual"),
        (10.0, "missed", "schedule"),
    ]
    assert len(await store.list_firings("r", limit=1)) == 1
    assert [f.scheduled_for for f in await store.list_firings("r", kind="schedule")] == [30.0, 10.0]


async def test_routine_state_is_registered_once_and_can_be_disabled(store: Store) -> None:
    first = await store.register_routine("r")
    again = await store.register_routine("r")
    assert first == again
    assert first.enabled
    off = await store.set_routine_enabled("r", False)
    assert (off.enabled, off.anchor_at) == (False, first.anchor_at)
    assert [r.name for r in await store.list_routine_records()] == ["r"]
    await store.record_firing(Firing("r", 1.0), "missed")
    await store.delete_routine("r")
    assert await store.list_routine_records() == []
    assert await store.list_firings("r") == []
