"""Routine errors. Both are the user's to fix::

UserError
└── RoutineError           a routine file or request is invalid (names file and key)
    └── UnknownRoutineError  no routine of that name
"""

from __future__ import annotations

from chorus._errors import NotFoundError, UserError


class RoutineError(UserError):
    """A routine is invalid; the message names the file and the key."""


class UnknownRoutineError(RoutineError, NotFoundError):
    def __init__(self, name: str) -> None:
        super().__init__(f"no routine named {name!r} (see `chorus routine list`)")
        self.name = name
