"""Gateway sessions under ``policy.toml`` like the daemon's jobs (tool permissions,
audit, modes), and logged so that ``chorus replay`` checks them like jobs."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from chorus.bodies import replay_codecs
from chorus.events import (
    Event,
    PermissionDecision,
    ToolResult,
    TurnCompleted,
    TurnFailed,
)
from chorus.gateway import GatewayCode, PolicyGuards, ResponseError
from chorus.policy import AuditLog, Policy
from chorus.store import replay
from chorus.testing import shell, text

if TYPE_CHECKING:
    from conftest import GatewayFactory, Harness

pytestmark = pytest.mark.e2e


def _turn_end(event: Event) -> bool:
    return isinstance(event, TurnCompleted | TurnFailed)


async def test_policy_gate_decides_tools_and_owns_the_mode(
    start_gateway: GatewayFactory,
) -> None:
    audit = AuditLog()
    async with start_gateway(guards=PolicyGuards(Policy(), audit)) as harness:
        if "claude" not in harness.clis:
            pytest.skip("claude CLI not installed")
        harness.server.script(
            [shell("sudo rm -rf /tmp/nothing-here"), text("it was refused"),
             shell("echo allowed > ok.txt"), text("done")]
        )  # fmt: skip
        async with harness.client() as brain:
            info = await harness.open_session(brain, "claude", permission_mode="bypassPermissions")
            assert info["permission_mode"] == "bypassPermissions"  # the gate's mode
            await brain.send_user("try the dangerous thing")
            refused = await brain.until(_turn_end, timeout=60)
            await brain.send_user("now the safe thing")
            allowed = await brain.until(_turn_end, timeout=60)
            assert await brain.request("set_permission_mode", mode="plan") == {"mode": "plan"}
            assert (await brain.request("status"))["permission_mode"] == "plan"
            with pytest.raises(ResponseError) as caught:
                await brain.request("set_permission_mode", mode="yolo")
            assert caught.value.code == GatewayCode.INVALID_REQUEST
        denial = next(e for e in refused if isinstance(e, PermissionDecision))
        assert denial.decision == "deny"
        assert "sudo" in (denial.reason or "")
        assert any(isinstance(e, ToolResult) and e.is_error for e in refused)
        assert any(isinstance(e, PermissionDecision) and e.decision == "allow" for e in allowed)
        assert (harness.work / "ok.txt").read_text() == "allowed\n"
    kinds = [entry.kind for entry in audit.entries()]
    assert kinds  # decisions and tool calls went to the audit chain
    assert audit.verify().ok


async def test_gateway_sessions_replay_like_jobs(harness: Harness) -> None:
    if "claude" not in harness.clis:
        pytest.skip("claude CLI not installed")
    harness.server.script([shell("echo hi > a.txt"), text("done")])
    async with harness.client() as brain:
        info = await harness.open_session(brain, "claude", permission_mode="default")
        await brain.request("set_model", model="claude-sonnet-4-5")
        await brain.send_user("go")
        await brain.until(_turn_end, timeout=60)
    report = await replay(harness.store, info["session_id"], replay_codecs()["claude"])
    assert report.divergence is None, report.divergence
    assert report.compared > 5
