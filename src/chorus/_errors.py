"""Chorus's exception tree.

Every error Chorus raises derives from :class:`ChorusError`. The tree is split by
who is to blame, so callers can decide what to do without parsing messages::

    ChorusError
    ├── UserError                  bad input from the person or the brain (exit code 2)
    │   ├── ConfigError            config.toml / policy.toml invalid
    │   ├── NotFoundError          the request named something that does not exist (404)
    │   ├── UnknownBodyError       a body name nobody configured
    │   └── AgentNotFoundError     the agent CLI binary is missing
    ├── EventError                 a frame or event could not be decoded
    │   ├── InvalidEventError      wrong type / missing field / not JSON
    │   └── EventTooLargeError     payload over the size cap (checked before parsing)
    ├── BodyError                  the agent CLI misbehaved
    │   ├── BodyCrashedError       the process died (exit code, stderr tail)
    │   ├── BodyProtocolError      it wrote something its codec cannot accept
    │   └── BodyTimeoutError       it did not answer within a deadline
    ├── LimitError                 we hit one of our own bounds
    │   └── LineTooLongError       a stdout line above the framing cap
    └── UnsupportedControlError    the body cannot do this control at all

Foreign exceptions (pydantic, OSError, json) are translated at the boundary where
they arise; no bare ``Exception`` crosses a public API.
"""

from __future__ import annotations

__all__ = [
    "AgentNotFoundError",
    "BodyCrashedError",
    "BodyError",
    "BodyProtocolError",
    "BodyTimeoutError",
    "ChorusError",
    "ConfigError",
    "EventError",
    "EventTooLargeError",
    "InvalidEventError",
    "LimitError",
    "LineTooLongError",
    "NotFoundError",
    "UnknownBodyError",
    "UnsupportedControlError",
    "UserError",
]


class ChorusError(Exception):
    """Root of every error Chorus raises."""


class UserError(ChorusError):
    """The input was wrong; the CLI exits with code 2 and writes nothing."""

    exit_code = 2


class NotFoundError(UserError):
    """The request named a thing (a routine, a team, ...) that does not exist; over
    HTTP a 404 (see :mod:`chorus.web`)."""


class ConfigError(UserError):
    """A configuration file is malformed or fails validation."""


class UnknownBodyError(UserError):
    """The requested body is not built in and not configured."""


class AgentNotFoundError(UserError):
    """The agent CLI for a body cannot be found (config, project folder, PATH)."""


class EventError(ChorusError):
    """An event or protocol frame could not be decoded."""


class InvalidEventError(EventError):
    """Not JSON, wrong type, or a required field is missing."""


class EventTooLargeError(EventError):
    """The payload is larger than the configured cap; it was not parsed."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"payload of {size} bytes exceeds the limit of {limit} bytes")
        self.size = size
        self.limit = limit


class BodyError(ChorusError):
    """The agent CLI process misbehaved."""


class BodyCrashedError(BodyError):
    """The agent process exited unexpectedly."""

    def __init__(self, message: str, *, exit_code: int | None, stderr_tail: str) -> None:
        super().__init__(message)
        self.exit_code = exit_code
        self.stderr_tail = stderr_tail


class BodyProtocolError(BodyError):
    """The agent wrote a line its codec cannot accept."""

    def __init__(self, message: str, *, line: str | None = None) -> None:
        super().__init__(message)
        self.line = line


class BodyTimeoutError(BodyError):
    """The agent did not answer within the deadline."""


class LimitError(ChorusError):
    """One of Chorus's own bounds was reached."""


class LineTooLongError(LimitError):
    """A line from a body exceeded the framing cap."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"line longer than {limit} bytes")
        self.limit = limit


class UnsupportedControlError(ChorusError):
    """The body does not support this control, natively or emulated."""

    def __init__(self, body: str, control: str, detail: str = "") -> None:
        msg = f"body {body!r} does not support {control!r}"
        super().__init__(f"{msg}: {detail}" if detail else msg)
        self.body = body
        self.control = control
