"""The integrity guardian: SHA-256 baselines of SOUL.md, MEMORY.md,
policy.toml and config.toml out of the bodies' reach; a change Chorus did not make
is quarantined, the baseline restored, audited and notified."""

from chorus.integrity._guardian import (
    GUARDED,
    RELOADED,
    FileState,
    Guardian,
    Incident,
    digest,
)
from chorus.integrity._watch import guard_now, report

__all__ = [
    "GUARDED",
    "RELOADED",
    "FileState",
    "Guardian",
    "Incident",
    "digest",
    "guard_now",
    "report",
]
