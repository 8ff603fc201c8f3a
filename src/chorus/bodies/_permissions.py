"""The permission types, as the bodies import them (they live in the leaf package
:mod:`chorus.permissions`, shared with the policy), and the text that tells a model
why its tool calls were denied."""

from collections.abc import Collection

from chorus.permissions import (
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
    "denial_notice",
    "rule_callback",
]


def denial_notice(reasons: Collection[str]) -> str:
    """The prompt that tells the model why its tool calls were denied (for agents whose
    protocol has no room for a reason in the denial itself)."""
    listed = "\n".join(f"- {reason}" for reason in reasons)
    return (
        "[Chorus policy] These actions were denied and will stay denied; do not retry "
        f"them, find another way or say why you cannot:\n{listed}"
    )
