"""The flag desk on a real SQLite store: raising (checked input, a Flag event, a
notification), deadlines, and each decision told to its job exactly once."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from chorus._errors import ChorusError, UserError
from chorus.config import FlagsConfig
from chorus.events import Event, Flag
from chorus.flags import FlagDesk, steer_text
from chorus.store import Redactor, SqliteStore


class Job:
    """What the desk reaches the daemon through, recorded."""

    def __init__(self) -> None:
        self.steers: list[tuple[str, str]] = []
        self.events: list[tuple[str, Event]] = []
        self.notes: list[tuple[str, str]] = []
        self.refuse = False

    async def steer(self, job_id: str, text: str) -> dict[str, Any]:
        if self.refuse:
            raise ChorusError("no such job any more")
        self.steers.append((job_id, text))
        return {"job_id": job_id, "how": "native"}

    async def note(self, job_id: str, event: Event) -> Event:
        self.events.append((job_id, event))
        return event

    async def notify(self, title: str, text: str) -> None:
        self.notes.append((title, text))


@pytest.fixture
async def store(chorus_home: Path) -> AsyncIterator[SqliteStore]:
    async with SqliteStore(redactor=Redactor()) as opened:
        yield opened


def _desk(store: SqliteStore, job: Job, **config: Any) -> FlagDesk:
    settings = FlagsConfig(**config)
    return FlagDesk(store, settings, steer=job.steer, note=job.note, notify=job.notify)


def _names(job: Job) -> list[str]:
    return [e.name for _, e in job.events if isinstance(e, Flag)]


async def test_a_raised_flag_is_stored_logged_and_notified(store: SqliteStore) -> None:
    job = Job()
    desk = _desk(store, job, flag_timeout="2m")
    before = time.time()
    flag = await desk.raise_flag(
        "Archive or delete?", default="archive", options=["archive", "delete"], job_id="j1"
    )
    assert 119 < flag.deadline_at - before < 121
    assert (await store.get_flag(flag.id)).status == "pending"
    assert desk.pending_ids == [flag.id]
    assert _names(job) == ["raised"]
    event = job.events[0][1]
    assert isinstance(event, Flag)
    assert (event.flag_id, event.default, event.options) == (
        flag.id,
        "archive",
        ["archive", "delete"],
    )
    assert f"chorus approve j1 {flag.id}" in (event.answer_hint or "")
    assert job.notes == [(f"Chorus flag {flag.id}", "Archive or delete? (default: archive)")]


async def test_no_notification_when_notify_on_flag_is_off(store: SqliteStore) -> None:
    job = Job()
    await _desk(store, job, notify_on_flag=False).raise_flag("Go?", default="yes", job_id="j1")
    assert job.notes == []


@pytest.mark.parametrize(
    ("question", "default", "options", "message"),
    [
        ("  ", "a", [], "question is empty"),
        ("Which?", "", [], "needs a default"),
        ("Which?", "c", ["a", "b"], "not one of the options"),
        ("x" * 2001, "a", [], "longer than"),
    ],
)
async def test_bad_flags_are_refused_and_nothing_is_stored(
    store: SqliteStore, question: str, default: str, options: list[str], message: str
) -> None:
    job = Job()
    with pytest.raises(UserError, match=message):
        await _desk(store, job).raise_flag(question, default=default, options=options)
    assert await store.list_flags() == []
    assert job.events == []


async def test_an_overruling_decision_is_steered_once(store: SqliteStore) -> None:
    job = Job()
    desk = _desk(store, job)
    flag = await desk.raise_flag("Which?", default="a", options=["a", "b"], job_id="j1")
    assert await desk.tick() == []  # nothing decided yet
    decided = await store.decide_flag(flag.id, "approved", choice="b")
    told = await desk.tick()
    assert [(f.id, f.delivery) for f in told] == [(flag.id, "native")]
    assert job.steers == [("j1", steer_text(decided))]
    assert "the person chose 'b'" in job.steers[0][1]
    assert _names(job) == ["raised", "approved"]
    assert await desk.tick() == []  # told once
    assert len(job.steers) == 1
    assert desk.pending_ids == []


async def test_keeping_the_default_is_announced_but_not_steered(store: SqliteStore) -> None:
    job = Job()
    desk = _desk(store, job)
    flag = await desk.raise_flag("Which?", default="a", options=["a", "b"], job_id="j1")
    await store.decide_flag(flag.id, "approved")
    assert [f.delivery for f in await desk.tick()] == ["announced"]
    assert job.steers == []
    assert _names(job) == ["raised", "approved"]


async def test_a_passed_deadline_makes_the_default_final(store: SqliteStore) -> None:
    job = Job()
    desk = _desk(store, job)
    flag = await desk.raise_flag("Which?", default="a", options=["a", "b"], job_id="j1")
    told = await desk.tick(now=flag.deadline_at + 1)
    assert [(f.status, f.choice, f.delivery) for f in told] == [("timed_out", "a", "announced")]
    assert job.steers == []
    assert _names(job) == ["raised", "timed_out"]


async def test_a_rejection_says_why_and_a_failed_delivery_is_recorded(
    store: SqliteStore,
) -> None:
    job = Job()
    desk = _desk(store, job)
    flag = await desk.raise_flag("Which?", default="a", options=["a", "b"], job_id="j1")
    await store.decide_flag(flag.id, "rejected", reason="not on a Friday")
    job.refuse = True
    told = await desk.tick()
    assert told[0].delivery == "failed: no such job any more"
    assert "rejected that (not on a Friday)" in steer_text(told[0])
    assert await desk.tick() == []  # recorded, not retried forever
