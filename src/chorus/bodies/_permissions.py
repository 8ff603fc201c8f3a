"""The permission types, as the bodies import them (they live in the leaf package
:mod:`chorus.permissions`, shared with the policy)."""

from chorus.permissions import (
    PermissionAnswer,
    PermissionAsk,
    PermissionCallback,
    allow_all,
    rule_callback,
)

__all__ = ["PermissionAnswer", "PermissionAsk", "PermissionCallback", "allow_all", "rule_callback"]
