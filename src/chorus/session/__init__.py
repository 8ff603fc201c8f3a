"""Sessions that live: one body kept warm across jobs and brains.

The layer between the daemon's supervisor and gateway and the bodies
(supervisor/gateway -> session -> body -> codec). :class:`SessionHub` holds the
live sessions (one CLI process per stored session at most); a
:class:`Session` owns one started body, runs :class:`Turn` s one at a time,
records every event, and steers the running turn natively or by emulation;
:class:`BodyLauncher` is the one place bodies are built, :func:`make_hub` the one
place a hub is.
"""

from __future__ import annotations

from chorus._lazy import lazy_names

#: ``typing`` is not imported at run time (the names load on first use).
TYPE_CHECKING = False

if TYPE_CHECKING:
    from chorus.session._brains import Asker, Authority, BrainAnswer, settles
    from chorus.session._errors import IllegalTransitionError, SessionError
    from chorus.session._hub import HubLimits, SessionHub, checked_cwd
    from chorus.session._launcher import (
        BodyFactory,
        BodyLauncher,
        Launch,
        PolicyGuards,
        checked_mode,
        cli_name,
        native_mode,
        policy_guards,
    )
    from chorus.session._lifecycle import TRANSITIONS, Lifecycle, State
    from chorus.session._make import hub_limits, make_hub
    from chorus.session._reattach import (
        Snapshot,
        bodies_dir,
        discard,
        job_turn,
        keep_flag,
        snapshot_of,
    )
    from chorus.session._session import CAPABILITY_OF, Session, Turn, native_ids, start_time

__all__ = [
    "CAPABILITY_OF",
    "TRANSITIONS",
    "Asker",
    "Authority",
    "BodyFactory",
    "BodyLauncher",
    "BrainAnswer",
    "HubLimits",
    "IllegalTransitionError",
    "Launch",
    "Lifecycle",
    "PolicyGuards",
    "Session",
    "SessionError",
    "SessionHub",
    "Snapshot",
    "State",
    "Turn",
    "bodies_dir",
    "checked_cwd",
    "checked_mode",
    "cli_name",
    "discard",
    "hub_limits",
    "job_turn",
    "keep_flag",
    "make_hub",
    "native_ids",
    "native_mode",
    "policy_guards",
    "settles",
    "snapshot_of",
    "start_time",
]

#: Each public name's private module (and its name there): loaded on first use.
_LAZY: dict[str, tuple[str, str]] = {
    "Asker": ("chorus.session._brains", "Asker"),
    "Authority": ("chorus.session._brains", "Authority"),
    "BrainAnswer": ("chorus.session._brains", "BrainAnswer"),
    "settles": ("chorus.session._brains", "settles"),
    "IllegalTransitionError": ("chorus.session._errors", "IllegalTransitionError"),
    "SessionError": ("chorus.session._errors", "SessionError"),
    "HubLimits": ("chorus.session._hub", "HubLimits"),
    "SessionHub": ("chorus.session._hub", "SessionHub"),
    "checked_cwd": ("chorus.session._hub", "checked_cwd"),
    "BodyFactory": ("chorus.session._launcher", "BodyFactory"),
    "BodyLauncher": ("chorus.session._launcher", "BodyLauncher"),
    "Launch": ("chorus.session._launcher", "Launch"),
    "PolicyGuards": ("chorus.session._launcher", "PolicyGuards"),
    "checked_mode": ("chorus.session._launcher", "checked_mode"),
    "cli_name": ("chorus.session._launcher", "cli_name"),
    "native_mode": ("chorus.session._launcher", "native_mode"),
    "policy_guards": ("chorus.session._launcher", "policy_guards"),
    "TRANSITIONS": ("chorus.session._lifecycle", "TRANSITIONS"),
    "Lifecycle": ("chorus.session._lifecycle", "Lifecycle"),
    "State": ("chorus.session._lifecycle", "State"),
    "hub_limits": ("chorus.session._make", "hub_limits"),
    "make_hub": ("chorus.session._make", "make_hub"),
    "Snapshot": ("chorus.session._reattach", "Snapshot"),
    "bodies_dir": ("chorus.session._reattach", "bodies_dir"),
    "discard": ("chorus.session._reattach", "discard"),
    "job_turn": ("chorus.session._reattach", "job_turn"),
    "keep_flag": ("chorus.session._reattach", "keep_flag"),
    "snapshot_of": ("chorus.session._reattach", "snapshot_of"),
    "CAPABILITY_OF": ("chorus.session._session", "CAPABILITY_OF"),
    "Session": ("chorus.session._session", "Session"),
    "Turn": ("chorus.session._session", "Turn"),
    "native_ids": ("chorus.session._session", "native_ids"),
    "start_time": ("chorus.session._session", "start_time"),
}


__getattr__, __dir__ = lazy_names(__name__, _LAZY, __all__)
