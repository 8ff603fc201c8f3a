"""The session lifecycle is one transition table: listed moves work, others raise."""

from __future__ import annotations

import pytest

from chorus.session import TRANSITIONS, IllegalTransitionError, Lifecycle, SessionError, State


@pytest.mark.parametrize(
    ("old", "new"), [(old, new) for old, targets in TRANSITIONS.items() for new in sorted(targets)]
)
def test_every_listed_move_is_allowed(old: State, new: State) -> None:
    life = Lifecycle("s1", old)
    life.to(new)
    assert life.state is new


@pytest.mark.parametrize(
    ("old", "new"),
    [(old, new) for old in State for new in State if new not in TRANSITIONS[old]],
)
def test_every_other_move_raises_a_typed_error(old: State, new: State) -> None:
    life = Lifecycle("s1", old)
    with pytest.raises(IllegalTransitionError) as caught:
        life.to(new)
    assert life.state is old  # nothing moved
    assert isinstance(caught.value, SessionError)
    assert caught.value.code == "internal"
    assert f"{old} -> {new}" in str(caught.value)


def test_ended_is_final_and_end_is_idempotent() -> None:
    life = Lifecycle("s1", State.RUNNING)
    life.end()
    life.end()
    assert life.ended
    assert TRANSITIONS[State.ENDED] == frozenset()


def test_a_new_session_starts_in_starting() -> None:
    assert Lifecycle("s1").state is State.STARTING
