"""Chorus: one control plane for coding-agent CLIs.

The public surface is what this module exports; everything in a module whose
name starts with an underscore is private.
"""

from chorus._errors import (
    AgentNotFoundError,
    BodyCrashedError,
    BodyError,
    BodyProtocolError,
    BodyTimeoutError,
    ChorusError,
    ConfigError,
    EventError,
    EventTooLargeError,
    InvalidEventError,
    LimitError,
    LineTooLongError,
    NotFoundError,
    UnknownBodyError,
    UnsupportedControlError,
    UserError,
)

__version__ = "0.1.0"

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
    "__version__",
]
