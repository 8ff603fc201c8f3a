"""The permission types, as the bodies import them (they live in the leaf package
:mod:`chorus.permissions`, shared with the policy), and the text that tells a model
why its tool calls were denied (the policy's one wording, :mod:`chorus.policy`)."""

from chorus.permissions import (
    PermissionAnswer,
    PermissionAsk,
    PermissionCallback,
    allow_all,
    rule_callback,
)
from chorus.policy import denial_notice

__all__ = [
    "PermissionAnswer",
    "PermissionAsk",
    "PermissionCallback",
    "allow_all",
    "denial_notice",
    "rule_callback",
]
