"""The bodies' one lifecycle table: every listed move works, every other one raises."""

from __future__ import annotations

import itertools

import pytest

from chorus.bodies import (
    BODY_TRANSITIONS,
    TURN_STATES,
    BodyLifecycle,
    BodyState,
    IllegalBodyTransitionError,
)

S = BodyState
LEGAL = [(old, new) for old, news in BODY_TRANSITIONS.items() for new in sorted(news)]
ILLEGAL = [
    (old, new)
    for old, new in itertools.product(BodyState, BodyState)
    if new not in BODY_TRANSITIONS[old]
]


def test_the_table_covers_every_state_and_names_only_states() -> None:
    assert set(BODY_TRANSITIONS) == set(BodyState)
    assert all(news <= set(BodyState) for news in BODY_TRANSITIONS.values())
    assert BODY_TRANSITIONS[S.CLOSED] == BODY_TRANSITIONS[S.DETACHED] == frozenset()


def test_every_state_but_the_final_ones_can_close() -> None:
    closable = {old for old, news in BODY_TRANSITIONS.items() if S.CLOSING in news}
    assert closable == set(BodyState) - {S.CLOSING, S.CLOSED, S.DETACHED}


@pytest.mark.parametrize(("old", "new"), LEGAL, ids=[f"{o}->{n}" for o, n in LEGAL])
def test_a_legal_move_is_made(old: BodyState, new: BodyState) -> None:
    life = BodyLifecycle("claude", old)
    life.to(new)
    assert life.state is new
    assert life.previous is old
    assert life.turn_over.is_set() is (new not in TURN_STATES)


@pytest.mark.parametrize(("old", "new"), ILLEGAL, ids=[f"{o}->{n}" for o, n in ILLEGAL])
def test_an_illegal_move_raises_and_changes_nothing(old: BodyState, new: BodyState) -> None:
    life = BodyLifecycle("codex", old)
    with pytest.raises(
        IllegalBodyTransitionError, match=f"codex body: illegal move {old} -> {new}"
    ):
        life.to(new)
    assert life.state is old


def test_a_second_start_is_refused() -> None:
    life = BodyLifecycle("gemini")
    life.to(S.STARTING)
    life.to(S.READY)
    with pytest.raises(IllegalBodyTransitionError, match="ready -> starting"):
        life.to(S.STARTING)


def test_a_turn_clears_turn_over_and_its_end_sets_it() -> None:
    life = BodyLifecycle("claude", S.READY)
    life.to(S.BUSY)
    assert not life.turn_over.is_set()
    life.to(S.INTERRUPTING)
    assert not life.turn_over.is_set()  # still the same turn
    life.end_turn()
    assert life.state is S.READY
    assert life.turn_over.is_set()


def test_an_escalating_turn_ends_but_waits_for_its_process() -> None:
    life = BodyLifecycle("codex", S.ESCALATING)
    life.turn_over.clear()
    life.end_turn()
    assert life.state is S.ESCALATING  # the process group is being killed
    assert life.turn_over.is_set()
    life.exited()
    assert life.state in {S.EXITED}  # (mypy narrowed the state above)


@pytest.mark.parametrize(
    ("old", "after"),
    [
        (S.STARTING, S.EXITED),
        (S.READY, S.EXITED),
        (S.BUSY, S.EXITED),
        (S.CLOSING, S.CLOSED),
        (S.RESPAWNING, S.RESPAWNING),  # the start goes on with a new process
        (S.CLOSED, S.CLOSED),
        (S.EXITED, S.EXITED),
    ],
)
def test_the_process_end_moves_where_the_table_says(old: BodyState, after: BodyState) -> None:
    life = BodyLifecycle("acp", old)
    life.exited()
    assert life.state is after


def test_a_closed_body_remembers_it_was_closed_mid_turn() -> None:
    life = BodyLifecycle("claude", S.BUSY)
    life.to(S.CLOSING)
    assert life.previous is S.BUSY
    life.close_done()
    assert life.state is S.CLOSED
    life.close_done()  # idempotent
    assert life.finished
