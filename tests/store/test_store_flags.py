"""The flags table on both backends: create, prefix lookup, decide once, deadlines,
decisions due for delivery."""

from __future__ import annotations

import time

import pytest

from chorus._errors import UserError
from chorus.store import (
    AmbiguousIdError,
    FlagDecidedError,
    Redactor,
    Store,
    UnknownFlagError,
)
from tests.store.conftest import MakeStore


async def test_a_flag_round_trips_pending(store: Store) -> None:
    made = await store.create_flag(
        "archive or delete?",
        default="archive",
        options=["archive", "delete"],
        deadline_at=123.0,
        job_id="j1",
        session_id="s1",
    )
    got = await store.get_flag(made.id)
    assert got == made
    assert (got.status, got.default, got.options, got.deadline_at) == (
        "pending",
        "archive",
        ["archive", "delete"],
        123.0,
    )
    assert got.choice is None
    assert got.decided_at is None
    assert not got.due
    assert [f.id for f in await store.list_flags(status="pending")] == [made.id]
    assert await store.list_flags(status="approved") == []
    assert [f.id for f in await store.list_flags(job_id="j1")] == [made.id]
    assert await store.list_flags(job_id="other") == []


async def test_a_flag_is_found_by_a_unique_prefix(store: Store) -> None:
    one = await store.create_flag("q?", default="a", deadline_at=1.0, flag_id="fl-aaa111")
    await store.create_flag("q?", default="a", deadline_at=1.0, flag_id="fl-aaa222")
    assert (await store.get_flag("fl-aaa1")).id == one.id
    with pytest.raises(AmbiguousIdError):
        await store.get_flag("fl-aaa")
    for bad in ("fl-zzz", "", "fl-%", "fl_"):
        with pytest.raises(UnknownFlagError):
            await store.get_flag(bad)


async def test_approving_with_another_option_overrules_and_is_due(store: Store) -> None:
    flag = await store.create_flag(
        "archive or delete?", default="archive", options=["archive", "delete"], deadline_at=1e12
    )
    kept = await store.decide_flag(flag.id, "approved")
    assert (kept.status, kept.choice, kept.overrules) == ("approved", "archive", False)
    other = await store.create_flag(
        "archive or delete?", default="archive", options=["archive", "delete"], deadline_at=1e12
    )
    changed = await store.decide_flag(other.id, "approved", choice="delete", decided_by="cli")
    assert (changed.choice, changed.decided_by, changed.overrules) == ("delete", "cli", True)
    assert [f.id for f in await store.due_flags()] == [flag.id, other.id]
    await store.mark_flag_delivered(flag.id, "announced")
    delivered = await store.mark_flag_delivered(other.id, "steered")
    assert delivered.delivery == "steered"
    assert delivered.delivered_at is not None
    assert await store.due_flags() == []


async def test_a_flag_is_decided_once_and_a_second_decision_changes_nothing(store: Store) -> None:
    flag = await store.create_flag("go on?", default="yes", deadline_at=1e12)
    rejected = await store.decide_flag(flag.id, "rejected", reason="not on a Friday")
    assert (rejected.status, rejected.reason, rejected.overrules) == (
        "rejected",
        "not on a Friday",
        True,
    )
    with pytest.raises(FlagDecidedError, match="already decided"):
        await store.decide_flag(flag.id, "approved")
    assert await store.get_flag(flag.id) == rejected


async def test_bad_decisions_are_refused_and_write_nothing(store: Store) -> None:
    flag = await store.create_flag("which?", default="a", options=["a", "b"], deadline_at=1e12)
    with pytest.raises(UserError, match="not an option"):
        await store.decide_flag(flag.id, "approved", choice="c")
    with pytest.raises(UserError, match="not a decision"):
        await store.decide_flag(flag.id, "timed_out_maybe")
    assert (await store.get_flag(flag.id)).status == "pending"


async def test_deadlines_settle_with_the_default_and_survive_a_reopen(
    make_store: MakeStore,
) -> None:
    now = time.time()
    async with make_store() as first:
        late = await first.create_flag("q?", default="a", deadline_at=now + 0.5)
        later = await first.create_flag("q?", default="a", deadline_at=now + 1000)
    async with make_store() as second:
        assert await second.expire_flags(now) == []
        expired = await second.expire_flags(now + 1)
        assert [(f.id, f.status, f.choice, f.decided_by) for f in expired] == [
            (late.id, "timed_out", "a", "timeout")
        ]
        assert not expired[0].overrules
        assert [f.id for f in await second.due_flags()] == [late.id]
        assert (await second.get_flag(later.id)).status == "pending"
        with pytest.raises(FlagDecidedError):
            await second.decide_flag(late.id, "rejected", reason="too late")


async def test_flag_text_is_redacted(make_store: MakeStore) -> None:
    redactor = Redactor()
    redactor.add_secret("sk-live-verysecretvalue123")
    async with make_store(redactor=redactor) as store:
        flag = await store.create_flag(
            "use sk-live-verysecretvalue123?", default="yes", deadline_at=1e12
        )
        assert "verysecret" not in (await store.get_flag(flag.id)).question
