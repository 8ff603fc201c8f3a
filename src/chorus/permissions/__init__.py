"""The permission contract between bodies and the policy: one ask, one answer.

A leaf package (it imports nothing of Chorus), so the bodies that raise asks and
the policy that answers them both depend on it rather than on each other.
"""

from chorus.permissions._types import (
    PermissionAnswer,
    PermissionAsk,
    PermissionCallback,
    allow_all,
    rule_callback,
)

__all__ = [
    "PermissionAnswer",
    "PermissionAsk",
    "PermissionCallback",
    "allow_all",
    "rule_callback",
]
