"""Tool permissions for gateway sessions: the same policy gate the daemon's jobs get.

A brain on the gateway must not be a way around ``policy.toml``. When the
gateway is given :class:`PolicyGuards` (the daemon builds them from its
policy, audit log and secret store), each session's body gets a
:class:`chorus.policy.PolicyGate` as its permission callback, every event
passes through the gate before it is logged (tool calls audited, tool results
scanned and marked untrusted), the body gets the secrets the policy allows it
as environment, and ``set_permission_mode`` changes the gate's (Chorus) mode.
As for the daemon's jobs, the CLI itself then runs in ``default`` mode (every
tool call reaches the gate) or ``plan`` (read-only).

Without guards (tests of the protocol alone) every tool is allowed.

Events are also tagged with their origin here, as the daemon tags them: events
a codec decodes from the CLI's output are ``codec`` (what ``chorus replay``
re-checks); those the body or Chorus makes are ``chorus``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from chorus.gateway._errors import GatewayCode, RequestError
from chorus.policy import (
    PERMISSION_MODES,
    AuditLog,
    PermissionMode,
    Policy,
    PolicyGate,
    SecretStore,
    policy_callback,
)
from chorus.store import event_origin

#: Kept under its old name for the gateway's public API.
origin_of = event_origin


def chorus_mode(mode: str | None) -> PermissionMode | None:
    """``mode`` if it is a Chorus permission mode (None stays None: the policy's default);
    else :class:`RequestError` ``invalid_request``."""
    if mode is None:
        return None
    for known in PERMISSION_MODES:
        if mode == known:
            return known
    raise RequestError(
        GatewayCode.INVALID_REQUEST,
        f"unknown permission mode {mode!r}; use one of {', '.join(PERMISSION_MODES)}",
    )


def native_mode(gate: PolicyGate) -> str:
    """The mode the CLI runs in under a gate: ``plan`` stays read-only, everything else
    is ``default`` so that every tool call reaches the gate."""
    return gate.native_mode


@dataclass(frozen=True, slots=True)
class PolicyGuards:
    """Builds each session's :class:`PolicyGate` from the daemon's policy parts."""

    policy: Policy
    audit: AuditLog | None = None
    secrets: SecretStore | None = None

    def gate(self, *, session_id: str, cwd: str | None, mode: str | None) -> PolicyGate:
        """A fresh gate for one session (``mode`` None: the policy's own mode)."""
        return policy_callback(
            self.policy,
            self.audit,
            mode=chorus_mode(mode),
            cwd=Path(cwd) if cwd else None,
            session_id=session_id,
            secrets=self.secrets.values if self.secrets is not None else (),
        )

    def env_for(self, body: str) -> dict[str, str]:
        """The secrets the policy lets ``body`` have, as environment variables."""
        if self.secrets is None:
            return {}
        return self.secrets.env_for(body, self.policy)


def policy_guards(
    policy: Policy | None, audit: AuditLog | None = None, secrets: SecretStore | None = None
) -> PolicyGuards | None:
    """Guards for a gateway, or None when there is no policy (every tool allowed)."""
    return PolicyGuards(policy, audit, secrets) if policy is not None else None
