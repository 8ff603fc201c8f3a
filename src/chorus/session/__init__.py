"""Sessions that live: one body kept warm across jobs and brains.

The layer between the daemon's supervisor and gateway and the bodies
(supervisor/gateway -> session -> body -> codec). :class:`SessionHub` holds the
live sessions (one CLI process per stored session at most); a
:class:`Session` owns one started body, runs :class:`Turn` s one at a time,
records every event, and steers the running turn natively or by emulation;
:class:`BodyLauncher` is the one place bodies are built, :func:`make_hub` the one
place a hub is.
"""

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
