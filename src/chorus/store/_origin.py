"""Which events a codec decoded from a body's output, and which Chorus made.

Replay re-runs a session's raw lines through a codec and compares only
``codec``-origin events, so every writer of the log (the daemon's jobs, the
gateway's sessions) must tag events the same way: by this one rule.
"""

from __future__ import annotations

from chorus.events import (
    CompatibilityWarning,
    ControlRequestEvent,
    ErrorCode,
    Event,
    Handoff,
    JobEnded,
    Notice,
    PermissionDecision,
    Routed,
    SessionEnded,
    Steer,
    TurnFailed,
    Worktree,
)
from chorus.store._records import ORIGIN_CHORUS, ORIGIN_CODEC

#: Event types a body or Chorus makes itself, never a codec from a CLI's line.
_CHORUS_MADE = (
    PermissionDecision,
    Notice,
    CompatibilityWarning,
    Handoff,
    JobEnded,
    Steer,
    SessionEnded,
    Worktree,
    Routed,
)
#: Control requests Chorus sends (a codec decodes only the CLI's own requests).
_OUR_CONTROLS = frozenset(
    {
        "initialize",
        "interrupt",
        "set_model",
        "set_permission_mode",
        "set_max_thinking_tokens",
        "mcp_status",
    }
)


def event_origin(event: Event) -> str:
    """``codec`` for events decoded from the body's output, ``chorus`` for the rest."""
    if isinstance(event, _CHORUS_MADE):
        return ORIGIN_CHORUS
    if isinstance(event, ControlRequestEvent) and event.subtype in _OUR_CONTROLS:
        return ORIGIN_CHORUS
    if isinstance(event, TurnFailed) and event.error.code in (
        ErrorCode.BODY_CRASHED,
        ErrorCode.TIMEOUT,
    ):
        return ORIGIN_CHORUS
    return ORIGIN_CODEC
