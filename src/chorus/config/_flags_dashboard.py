"""``[flags]`` and ``[dashboard]``."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, field_validator

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*$")
_UNIT = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0}


def duration_seconds(value: str | float) -> float:
    """``600``, ``"90s"``, ``"10m"``, ``"1h"`` -> seconds (> 0)."""
    if isinstance(value, int | float):
        seconds = float(value)
    else:
        match = _DURATION.match(value)
        if match is None:
            raise ValueError(f"{value!r} is not a duration; write e.g. 600, '90s', '10m', '1h'")
        seconds = float(match.group(1)) * _UNIT[match.group(2)]
    if seconds <= 0:
        raise ValueError("a duration must be more than 0 seconds")
    return seconds


class FlagsConfig(BaseModel):
    """``[flags]``: how long a flag waits for a person before its default is final,
    and whether a new flag notifies (desktop and the session's log)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    flag_timeout: str | float = "10m"
    notify_on_flag: bool = True
    #: How often the daemon settles deadlines and delivers decisions.
    check_every_s: float = Field(default=1.0, gt=0, le=60)

    @field_validator("flag_timeout")
    @classmethod
    def _timeout(cls, value: str | float) -> str | float:
        duration_seconds(value)
        return value

    @property
    def timeout_s(self) -> float:
        return duration_seconds(self.flag_timeout)


class DashboardConfig(BaseModel):
    """``[dashboard]``: the browser dashboard the daemon serves (``port = 0``: off)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    port: int = Field(default=7070, ge=0, le=65535)
    host: str = "127.0.0.1"
    #: Serve on a non-loopback ``host`` (off: such a host is refused).
    allow_remote: bool = False
    #: A live stream writes ``: ping`` after this many quiet seconds.
    stream_ping_s: float = Field(default=15.0, gt=0)
    #: End each live stream after this many seconds (the browser resumes it from
    #: the log); unset: streams last as long as the job. Useful behind proxies.
    stream_rotate_s: float | None = Field(default=None, gt=0)
    #: Open connections at once, all peers together; beyond it a new one is closed at
    #: accept (the daemon's file descriptors, and so its unix API, stay available).
    max_connections: int = Field(default=128, ge=1, le=100_000)
    #: Open connections from one peer address (every local browser is 127.0.0.1).
    max_connections_per_peer: int = Field(default=64, ge=1, le=100_000)
    #: A connection must send its whole request head within this (slowloris).
    header_timeout_s: float = Field(default=10.0, gt=0)

    @field_validator("host")
    @classmethod
    def _loopback(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("host is empty; leave it out for 127.0.0.1")
        return value
