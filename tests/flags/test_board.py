"""One board for flags and approvals: listing both, deciding either by id or
prefix, the job check, a second decision refused, and the REPL's :allow/:deny."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, cast

import pytest

from chorus._errors import UserError
from chorus.flags import board, decide, repl_answerer
from chorus.gateway._repl import Repl
from chorus.permissions import PermissionAsk
from chorus.policy import FlagBoard
from chorus.store import FlagDecidedError, Redactor, SqliteStore, UnknownFlagError


@pytest.fixture
async def store(chorus_home: Path) -> AsyncIterator[SqliteStore]:
    async with SqliteStore(redactor=Redactor()) as opened:
        yield opened


def _approval(session_id: str = "s1") -> Any:
    ask = PermissionAsk("claude", "shell", "Bash", {"command": "git push origin main"})
    return FlagBoard().raise_flag(
        ask, reason="elevated risk", default="deny", timeout_s=60, session_id=session_id
    )


async def test_flags_and_approvals_share_one_board(store: SqliteStore) -> None:
    waiting = _approval()
    flag = await store.create_flag(
        "Which?", default="a", options=["a", "b"], deadline_at=time.time() + 60, job_id="j1"
    )
    items = await board(store)
    assert [(i.id, i.kind) for i in items] == [(waiting.id, "approval"), (flag.id, "flag")]
    approval = items[0]
    assert "git push origin main" in approval.question
    assert (approval.default, approval.options, approval.body) == (
        "deny",
        ["allow", "deny"],
        "claude",
    )
    assert f"chorus approve - {waiting.id}" in approval.to_json()["answer"]


async def test_an_approval_is_allowed_or_denied_through_the_board(store: SqliteStore) -> None:
    allowed, denied = _approval(), _approval()
    item = await decide(store, allowed.id, "approve")
    assert (item.status, item.choice) == ("approved", "allow")
    await decide(store, denied.id, "reject", reason="not today")
    answer = FlagBoard().answer_of(denied.id)
    assert answer is not None
    assert (answer.decision, answer.note) == ("deny", "not today")
    with pytest.raises(FlagDecidedError, match="nothing changed"):
        await decide(store, allowed.id, "reject")
    assert await board(store) == []


async def test_a_flag_is_decided_by_prefix_and_only_for_its_own_job(store: SqliteStore) -> None:
    flag = await store.create_flag(
        "Which?", default="a", options=["a", "b"], deadline_at=time.time() + 60, job_id="job-123"
    )
    with pytest.raises(UserError, match="belongs to job job-123"):
        await decide(store, flag.id, "approve", job="other")
    assert (await store.get_flag(flag.id)).status == "pending"  # nothing written
    with pytest.raises(UnknownFlagError):
        await decide(store, "fl-nope", "approve")
    item = await decide(store, flag.id[:8], "approve", job="job-1", choice="b")
    assert (item.status, item.choice) == ("approved", "b")


async def test_the_repl_allows_and_denies_this_sessions_newest(store: SqliteStore) -> None:
    waiting = _approval("s1")
    _approval("another-session")
    flag = await store.create_flag(
        "Which?", default="a", deadline_at=time.time() + 60, session_id="s1"
    )
    said: list[str] = []
    repl = Repl(cast(Any, None), None, said.append, repl_answerer("s1"))
    assert await repl.handle(":deny too risky")
    assert said[-1] == f"{flag.id}: rejected"
    assert (await store.get_flag(flag.id)).reason == "too risky"
    assert await repl.handle(":allow")
    assert said[-1] == f"{waiting.id}: approved allow"
    assert await repl.handle(":allow")
    assert said[-1].startswith("error: nothing waits in this session")
    assert await repl.handle(":allow fl-nope")
    assert said[-1].startswith("error: no flag")
    remote = Repl(cast(Any, None), None, said.append)
    assert await remote.handle(":allow")
    assert "need the daemon's home" in said[-1]
