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

from chorus.session import PolicyGuards, policy_guards
from chorus.store import event_origin

__all__ = ["PolicyGuards", "origin_of", "policy_guards"]

#: Kept under its old name for the gateway's public API.
origin_of = event_origin
