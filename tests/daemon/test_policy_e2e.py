"""The daemon enforces the policy on a real CLI: denials reach the model, the audit
chain verifies, and a stored secret passed to the body never lands in CHORUS_HOME."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

from chorus.events import PermissionDecision, ToolResult, parse_event
from chorus.policy import DEFAULT_POLICY_TOML, scan_for_leaks
from chorus.testing import shell, text

if TYPE_CHECKING:
    from conftest import Chorus

pytestmark = pytest.mark.e2e

SECRET = "tok-9f8e7d6c5b4a-DEPLOY-0123"


def test_sudo_denied_audited_and_secret_never_written(chorus: Chorus) -> None:
    policy = DEFAULT_POLICY_TOML.replace("env_allowed = []", 'env_allowed = ["DEPLOY_TOKEN"]')
    (chorus.home / "policy.toml").write_text(policy)
    # Without the meter, so the value itself reaches the model (the meter would send
    # `[SECRET:DEPLOY_TOKEN]`, tests/daemon/test_meter_e2e.py): the log must still hide it.
    with (chorus.home / "config.toml").open("a") as f:
        f.write("[meter]\nenabled = false\n")
    stored = chorus.run("secret", "set", "DEPLOY_TOKEN", "--value", SECRET)
    assert stored.returncode == 0, stored.stderr
    chorus.server.script(
        [
            shell("sudo rm -rf /tmp/not-here"),
            shell("printenv DEPLOY_TOKEN"),
            text(f"the token is {SECRET}"),
        ]
    )
    result = chorus.run("ask", "show me the deploy token", "--body", "claude", "--json")
    assert result.returncode == 0, result.stderr
    events = [parse_event(line) for line in result.stdout.splitlines()]

    denials = [e for e in events if isinstance(e, PermissionDecision) and e.decision == "deny"]
    assert len(denials) == 1
    assert "sudo" in (denials[0].reason or "")
    second = chorus.server.turn_requests()[1].last_tool_result()
    assert second is not None
    assert second.is_error
    assert "sudo" in second.content  # the model was told why

    # The body really had the secret (the model saw it), yet the log shows it redacted.
    third = chorus.server.turn_requests()[2].last_tool_result()
    assert third is not None
    assert SECRET in third.content
    outputs = [e.output for e in events if isinstance(e, ToolResult)]
    assert any("[REDACTED" in out for out in outputs)
    assert SECRET not in result.stdout

    assert chorus.run("audit", "verify").returncode == 0
    audit = chorus.run("audit", "--json")
    kinds = [json.loads(line)["kind"] for line in audit.stdout.splitlines() if line.strip()]
    assert "permission_decision" in kinds or "policy_denial" in kinds
    assert scan_for_leaks({"DEPLOY_TOKEN": SECRET}, chorus.home) == []
