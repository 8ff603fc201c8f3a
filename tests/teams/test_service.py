"""The team service's bookkeeping on a real store, without bodies: how a job's end
settles what its turn carried, and what recovery does with what a dead daemon left."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from chorus.events import JobEnded
from chorus.store import JobState, NewMessage, Redactor, SqliteStore, Store, new_id
from chorus.teams import COORDINATOR, Member, TeamConfig, TeamService
from chorus.teams._config import save_team

TEAM = TeamConfig(name="t", members={"m": Member(body="claude")}, persistent=True)


class _Jobs:
    """Jobs that are only records in the store (nothing runs)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.woken = 0

    def wake(self) -> None:
        self.woken += 1

    def body_problem(self, body: str) -> str | None:
        return None

    def steers_natively(self, session_id: str) -> bool:
        return False

    async def steer(self, job_id: str, text: str) -> dict[str, Any]:
        raise AssertionError("not expected")

    async def interrupt(self, job_id: str) -> str:
        return "interrupted"

    async def note(self, job_id: str, message: str) -> None:
        pass

    async def close_session(self, session_id: str) -> None:
        pass


@pytest.fixture
async def store() -> AsyncIterator[SqliteStore]:
    async with SqliteStore(redactor=Redactor()) as opened:
        yield opened


async def _member_turn(store: Store, service: TeamService, text: str) -> str:
    """A task for ``m`` and the turn that carries it (a job, as the service starts it)."""
    await store.post_message(NewMessage(new_id(), "t", COORDINATOR, "m", "task", {"text": text}))
    job_id = await service._start_turn(TEAM, "m", "/")
    assert job_id is not None
    return job_id


async def _end(store: Store, job_id: str, state: JobState, text: str | None) -> None:
    await store.update_job(job_id, state=JobState.RUNNING)  # the supervisor claimed it
    ended = JobEnded(state=str(state), result=text)
    await store.end_job(job_id, state, ended, result={"text": text} if text else None)


async def _results(store: Store) -> list[tuple[str, str]]:
    rows = await store.list_messages("t", recipient=COORDINATOR)
    return [(m.id, m.body["text"]) for m in rows]


async def test_a_job_end_posts_the_result_then_acks_what_the_turn_carried(
    store: SqliteStore,
) -> None:
    save_team(TEAM)
    await store.set_team_members("t", TEAM.mailbox_names)
    service = TeamService(_Jobs(store))
    job_id = await _member_turn(store, service, "do it")
    assert service.current_job("t", "m") == job_id
    await _end(store, job_id, JobState.SUCCEEDED, "done")
    await service.ended(await store.get_job(job_id), "succeeded", "done", "")
    assert await _results(store) == [(f"result{job_id}", "done")]
    [task] = await store.list_messages("t", recipient="m")
    assert task.state == "acked"
    assert service.current_job("t", "m") is None


async def test_a_cancelled_turn_gives_its_messages_back(store: SqliteStore) -> None:
    save_team(TEAM)
    await store.set_team_members("t", TEAM.mailbox_names)
    service = TeamService(_Jobs(store))
    job_id = await _member_turn(store, service, "do it")
    await _end(store, job_id, JobState.CANCELLED, None)
    await service.ended(await store.get_job(job_id), "cancelled", None, "stopped")
    [task] = await store.list_messages("t", recipient="m")
    assert task.state == "pending"


async def test_recovery_settles_an_ended_turn_once_and_releases_a_lost_one(
    store: SqliteStore,
) -> None:
    save_team(TEAM)
    await store.set_team_members("t", TEAM.mailbox_names)
    dead = TeamService(_Jobs(store))
    job_id = await _member_turn(store, dead, "finished before the crash")
    await _end(store, job_id, JobState.SUCCEEDED, "the answer")  # ... and the daemon died
    lost = await store.post_message(NewMessage(new_id(), "t", "user", "m", "status", {"text": "x"}))
    await store.take_messages("t", "m", job_id="never-a-job")  # taken, no job made
    fresh = TeamService(_Jobs(store))
    assert await fresh.recover() == 1  # the lost turn's message is pending again
    assert await _results(store) == [(f"result{job_id}", "the answer")]
    states = {m.body["text"]: m.state for m in await store.list_messages("t", recipient="m")}
    assert states["finished before the crash"] == "acked"
    assert await fresh.recover() == 0  # a second recovery changes nothing
    assert len(await _results(store)) == 1
    [again] = await store.list_messages("t", recipient="m", unacked=True)
    assert again.id == lost.id


async def test_recovery_keeps_a_requeued_turn_running_with_its_messages(
    store: SqliteStore,
) -> None:
    save_team(TEAM)
    await store.set_team_members("t", TEAM.mailbox_names)
    job_id = await _member_turn(store, TeamService(_Jobs(store)), "in flight")
    fresh = TeamService(_Jobs(store))
    assert await fresh.recover() == 0
    assert fresh.current_job("t", "m") == job_id
    [task] = await store.list_messages("t", recipient="m")
    assert task.state == "delivered"
    assert task.delivered_to == job_id


async def test_a_member_reading_its_inbox_gets_each_message_once(store: SqliteStore) -> None:
    save_team(TEAM)
    await store.set_team_members("t", TEAM.mailbox_names)
    service = TeamService(_Jobs(store))
    sent = await service.send("t", "m", "read me", sender=COORDINATOR)
    assert sent["how"] == "waiting: delivered with the member's next turn"
    taken = await service.inbox("t", "m", job_id="turn-1")
    assert [m["body"]["text"] for m in taken] == ["read me"]
    assert taken[0]["state"] == "delivered"
    assert await service.inbox("t", "m", job_id="turn-1") == []
    assert await service.ack("t", [taken[0]["id"]]) == [taken[0]["id"]]
    await service.send("t", "m", "no turn", sender="user")
    [read] = await service.inbox("t", "m", job_id=None)  # read outside a turn: acked at once
    assert read["body"]["text"] == "no turn"
    assert await store.list_messages("t", unacked=True) == []
