"""Team mailboxes, on both backends: recipients are checked, delivery is
at least once with an explicit ack, and a crash releases what was never acked."""

from __future__ import annotations

import pytest

from chorus._errors import UserError
from chorus.store import NewMessage, Store, UnknownMemberError, new_id

from .conftest import MakeStore


def _msg(to: str, text: str = "hi", kind: str = "task", team: str = "t1") -> NewMessage:
    return NewMessage(new_id(), team, "coordinator", to, kind, {"text": text})


@pytest.fixture
async def team(store: Store) -> Store:
    await store.set_team_members("t1", ["coordinator", "perf", "security"])
    return store


async def test_members_are_replaced_and_listed_by_name(store: Store) -> None:
    await store.set_team_members("t1", ["b", "a"])
    assert await store.team_members("t1") == ["a", "b"]
    await store.set_team_members("t1", ["c"])
    assert await store.team_members("t1") == ["c"]
    await store.set_team_members("t1", [])
    assert await store.team_members("t1") == []
    assert await store.team_members("nope") == []


async def test_an_unknown_recipient_is_an_error_and_no_inbox(team: Store) -> None:
    with pytest.raises(UnknownMemberError) as caught:
        await team.post_message(_msg("ghost"))
    assert "perf, security" in str(caught.value)
    assert isinstance(caught.value, UserError)
    assert await team.list_messages("t1") == []
    with pytest.raises(UnknownMemberError):  # a team that does not exist has no members
        await team.post_message(_msg("perf", team="t2"))


async def test_an_unknown_kind_is_refused(team: Store) -> None:
    with pytest.raises(UserError):
        await team.post_message(_msg("perf", kind="gossip"))
    assert await team.list_messages("t1") == []


async def test_take_delivers_oldest_first_once_until_released(team: Store) -> None:
    first = await team.post_message(_msg("perf", "one"))
    await team.post_message(_msg("perf", "two"))
    await team.post_message(_msg("security", "other"))
    assert first.state == "pending"
    assert first.body == {"text": "one"}
    taken = await team.take_messages("t1", "perf", job_id="j1", limit=1)
    assert [m.body["text"] for m in taken] == ["one"]
    assert taken[0].delivered_to == "j1"
    assert taken[0].attempts == 1
    rest = await team.take_messages("t1", "perf", job_id="j2")
    assert [m.body["text"] for m in rest] == ["two"]
    assert await team.take_messages("t1", "perf") == []  # nothing is taken twice


async def test_ack_is_once_and_acked_messages_never_come_back(team: Store) -> None:
    posted = await team.post_message(_msg("perf"))
    await team.take_messages("t1", "perf", job_id="j1")
    assert await team.ack_messages([posted.id]) == [posted.id]
    assert await team.ack_messages([posted.id]) == []  # a second ack is a no-op
    assert await team.release_messages() == 0
    assert await team.take_messages("t1", "perf") == []
    [stored] = await team.list_messages("t1")
    assert stored.state == "acked"


async def test_release_of_one_turn_redelivers_only_its_messages(team: Store) -> None:
    await team.post_message(_msg("perf", "a"))
    await team.post_message(_msg("security", "b"))
    await team.take_messages("t1", "perf", job_id="j1")
    await team.take_messages("t1", "security", job_id="j2")
    assert await team.release_messages(job_id="j1") == 1
    again = await team.take_messages("t1", "perf", job_id="j3")
    assert [(m.body["text"], m.attempts) for m in again] == [("a", 2)]
    assert await team.take_messages("t1", "security") == []


async def test_a_post_is_idempotent_on_its_id(team: Store) -> None:
    msg = _msg("perf")
    first = await team.post_message(msg)
    second = await team.post_message(msg)
    assert first == second
    assert len(await team.list_messages("t1")) == 1


async def test_list_filters_by_recipient_and_unacked(team: Store) -> None:
    done = await team.post_message(_msg("perf", "done"))
    await team.post_message(_msg("perf", "open"))
    await team.post_message(_msg("security", "sec"))
    await team.take_messages("t1", "perf", job_id="j", limit=1)
    await team.ack_messages([done.id])
    perf = await team.list_messages("t1", recipient="perf")
    assert [m.body["text"] for m in perf] == ["done", "open"]
    unacked = await team.list_messages("t1", unacked=True)
    assert [m.body["text"] for m in unacked] == ["open", "sec"]
    assert len(await team.list_messages("t1", limit=1)) == 1


async def test_take_filters_by_kind(team: Store) -> None:
    await team.post_message(_msg("perf", "t", kind="task"))
    await team.post_message(_msg("perf", "s", kind="steer"))
    steers = await team.take_messages("t1", "perf", kind="steer")
    assert [m.kind for m in steers] == ["steer"]


async def test_unacked_deliveries_survive_a_reopen_and_are_released(
    make_store: MakeStore,
) -> None:
    async with make_store() as store:
        await store.set_team_members("t1", ["perf"])
        posted = await store.post_message(_msg("perf", "survive"))
        await store.take_messages("t1", "perf", job_id="dead-turn")
    async with make_store() as store:  # the daemon came back after a crash
        assert await store.take_messages("t1", "perf") == []  # still delivered to the dead turn
        assert await store.release_messages() == 1
        [again] = await store.take_messages("t1", "perf", job_id="new-turn")
        assert again.id == posted.id
        assert again.attempts == 2


async def test_secrets_in_a_message_body_are_redacted(make_store: MakeStore) -> None:
    from chorus.store import Redactor

    redactor = Redactor()
    redactor.add_secret("sk-verysecretvalue-1234567890")
    async with make_store(redactor=redactor) as store:
        await store.set_team_members("t1", ["perf"])
        posted = await store.post_message(_msg("perf", "key sk-verysecretvalue-1234567890"))
        assert "sk-verysecretvalue" not in posted.body["text"]
