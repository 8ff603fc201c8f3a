"""The permission callback every body routes its tool approvals through.

Claude's ``can_use_tool``, Codex's approval requests and ACP's
``session/request_permission`` all become one :class:`PermissionAsk` and get one
:class:`PermissionAnswer`. The policy layer plugs in here; until then
:func:`rule_callback` allows or denies by tool name.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass, field
from typing import Any, Literal


@dataclass(frozen=True, slots=True)
class PermissionAsk:
    body: str
    tool: str
    native_tool: str
    input: dict[str, Any]
    call_id: str | None = None
    description: str | None = None
    cwd: str | None = None
    paths: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class PermissionAnswer:
    decision: Literal["allow", "deny"]
    reason: str | None = None
    #: Replacement input for the tool (Claude ``updatedInput``); ``None`` keeps it.
    updated_input: dict[str, Any] | None = None
    #: "once" or "session" (ACP allow_always, Codex session approval).
    scope: Literal["once", "session"] = "once"
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def allow(cls) -> PermissionAnswer:
        return cls("allow")

    @classmethod
    def deny(cls, reason: str) -> PermissionAnswer:
        return cls("deny", reason=reason)


PermissionCallback = Callable[[PermissionAsk], Awaitable[PermissionAnswer]]


def rule_callback(
    *,
    allow: Collection[str] | None = None,
    deny: Collection[str] = (),
    reason: str = "denied by Chorus rule",
) -> PermissionCallback:
    """A simple callback: deny tools (normalized names) in ``deny``; allow those in
    ``allow`` (or everything when ``allow`` is ``None``); deny the rest."""

    async def decide(ask: PermissionAsk) -> PermissionAnswer:
        if ask.tool in deny or ask.native_tool in deny:
            return PermissionAnswer.deny(f"{reason}: {ask.tool}")
        if allow is None or ask.tool in allow or ask.native_tool in allow:
            return PermissionAnswer.allow()
        return PermissionAnswer.deny(f"{reason}: {ask.tool} is not allowed")

    return decide


async def allow_all(ask: PermissionAsk) -> PermissionAnswer:
    """Allow every tool (the default when no policy is configured)."""
    return PermissionAnswer.allow()
