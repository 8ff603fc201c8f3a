"""A body's lifecycle as one transition table, shared by every body.

::

    new ──► starting ──► ready ◄──► busy ──► interrupting ──► escalating
     │        │  ▲         ▲  ▲       │            │               │
     │        ▼  │         │  └───────┴────────────┘ (turn ended)  │
     │     respawning      │                                       │
     └──► attaching ───────┘ (or busy: a turn was running)         │
                                                                   ▼
    exited ◄── starting, ready and every turn state (the CLI ended by itself,
               or was killed after an interrupt it ignored)
    closing ◄── every state but closed and detached ──► closed
    detached ◄── ready, exited and every turn state   (left running for a later owner)

``respawning``: a start given up and begun once more (a handshake stuck past its
deadline, a resume the CLI refused). ``busy``, ``interrupting`` and
``escalating`` are the turn states: a turn the body holds. ``closed`` and
``detached`` are final; a move the table does not list raises
:class:`IllegalBodyTransitionError`. A body keeps its state in one
:class:`Lifecycle`, never in boolean flags.
"""

from __future__ import annotations

import asyncio
from enum import StrEnum

from chorus._errors import BodyError


class BodyState(StrEnum):
    NEW = "new"
    STARTING = "starting"
    RESPAWNING = "respawning"
    ATTACHING = "attaching"
    READY = "ready"
    BUSY = "busy"
    INTERRUPTING = "interrupting"
    ESCALATING = "escalating"
    EXITED = "exited"
    CLOSING = "closing"
    CLOSED = "closed"
    DETACHED = "detached"


S = BodyState
#: The states in which the body holds a turn.
TURN_STATES = frozenset({S.BUSY, S.INTERRUPTING, S.ESCALATING})
#: The states after which nothing more is read or written (``close`` is a no-op).
FINISHED = frozenset({S.CLOSING, S.CLOSED, S.DETACHED})
_LIVE = frozenset({S.READY, *TURN_STATES})

TRANSITIONS: dict[BodyState, frozenset[BodyState]] = {
    S.NEW: frozenset({S.STARTING, S.ATTACHING, S.CLOSING}),
    S.STARTING: frozenset({S.READY, S.RESPAWNING, S.EXITED, S.CLOSING}),
    S.RESPAWNING: frozenset({S.STARTING, S.CLOSING}),
    S.ATTACHING: frozenset({S.READY, S.BUSY, S.CLOSING}),
    S.READY: frozenset({S.BUSY, S.EXITED, S.CLOSING, S.DETACHED}),
    S.BUSY: frozenset({S.READY, S.INTERRUPTING, S.EXITED, S.CLOSING, S.DETACHED}),
    S.INTERRUPTING: frozenset({S.READY, S.ESCALATING, S.EXITED, S.CLOSING, S.DETACHED}),
    S.ESCALATING: frozenset({S.EXITED, S.CLOSING, S.DETACHED}),
    S.EXITED: frozenset({S.CLOSING, S.DETACHED}),
    S.CLOSING: frozenset({S.CLOSED}),
    S.CLOSED: frozenset(),
    S.DETACHED: frozenset(),
}


class IllegalBodyTransitionError(BodyError):
    """A lifecycle move the table does not allow (a bug, or a call out of order such
    as a second ``start``)."""

    def __init__(self, body: str, old: BodyState, new: BodyState) -> None:
        super().__init__(f"{body} body: illegal move {old} -> {new}")
        self.old = old
        self.new = new


class Lifecycle:
    """One body's state, moved only along :data:`TRANSITIONS`.

    ``previous`` is the state before the last move (``closing`` from a turn state:
    the body was closed mid-turn). ``turn_over`` is set whenever no turn is held,
    and as soon as the running turn's end is seen (:meth:`end_turn`)."""

    def __init__(self, body: str, state: BodyState = S.NEW) -> None:
        self.body = body
        self.state = state
        self.previous = state
        self.turn_over = asyncio.Event()
        if state not in TURN_STATES:
            self.turn_over.set()

    def to(self, new: BodyState) -> None:
        """Move to ``new``; a move the table does not allow raises."""
        if new not in TRANSITIONS[self.state]:
            raise IllegalBodyTransitionError(self.body, self.state, new)
        self.previous, self.state = self.state, new
        if new not in TURN_STATES:
            self.turn_over.set()
        elif self.previous not in TURN_STATES:
            self.turn_over.clear()

    def end_turn(self) -> None:
        """The running turn's end was seen: back to ``ready`` (an escalating turn
        stays until its process is gone). No-op without a turn."""
        if self.state in (S.BUSY, S.INTERRUPTING):
            self.to(S.READY)
        self.turn_over.set()

    def exited(self) -> None:
        """The CLI's process is gone: ``exited``, or ``closed`` when it was being
        closed. No-op in a state that expects it (respawning, final states)."""
        if self.state is S.CLOSING:
            self.to(S.CLOSED)
        elif S.EXITED in TRANSITIONS[self.state]:
            self.to(S.EXITED)

    def close_done(self) -> None:
        """``close`` has finished: ``closed`` (if the process end did not get there)."""
        if self.state is S.CLOSING:
            self.to(S.CLOSED)

    @property
    def in_turn(self) -> bool:
        return self.state in TURN_STATES

    @property
    def finished(self) -> bool:
        return self.state in FINISHED

    @property
    def live(self) -> bool:
        """Ready or in a turn: the body can take controls."""
        return self.state in _LIVE
