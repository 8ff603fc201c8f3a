"""A session's lifecycle as one transition table.

::

    starting ──► idle ◄──► running ──► interrupting
        │         │  ▲        │              │
        │         │  └────────┴──────────────┘   (the turn's terminal event)
        │         ▼
        │     restarting ──► idle                (model/mode change the body cannot do live)
        ▼
      ended ◄── from every state                 (body gone: closed, crashed, idle timeout)

``ended`` is final: a session whose body is gone leaves the hub, and the next
turn on the same stored session starts a new :class:`Session` with the CLI's
native resume. A move the table does not list raises
:class:`IllegalTransitionError`; nothing else in the layer keeps state flags.
"""

from __future__ import annotations

from enum import StrEnum

from chorus.session._errors import IllegalTransitionError


class State(StrEnum):
    STARTING = "starting"
    IDLE = "idle"
    RUNNING = "running"
    INTERRUPTING = "interrupting"
    RESTARTING = "restarting"
    ENDED = "ended"


TRANSITIONS: dict[State, frozenset[State]] = {
    State.STARTING: frozenset({State.IDLE, State.ENDED}),
    State.IDLE: frozenset({State.RUNNING, State.RESTARTING, State.ENDED}),
    State.RUNNING: frozenset({State.IDLE, State.INTERRUPTING, State.ENDED}),
    State.INTERRUPTING: frozenset({State.IDLE, State.ENDED}),
    State.RESTARTING: frozenset({State.IDLE, State.ENDED}),
    State.ENDED: frozenset(),
}

#: States in which the session holds no turn and can take one at once.
READY = frozenset({State.IDLE})


class Lifecycle:
    """The current state, moved only along :data:`TRANSITIONS`."""

    def __init__(self, session_id: str, state: State = State.STARTING) -> None:
        self.session_id = session_id
        self.state = state

    def to(self, new: State) -> None:
        """Move to ``new``; a move the table does not allow raises."""
        if new not in TRANSITIONS[self.state]:
            raise IllegalTransitionError(self.session_id, self.state, new)
        self.state = new

    def end(self) -> None:
        """Move to ``ended`` from wherever it is (idempotent)."""
        if self.state is not State.ENDED:
            self.to(State.ENDED)

    @property
    def ended(self) -> bool:
        return self.state is State.ENDED
