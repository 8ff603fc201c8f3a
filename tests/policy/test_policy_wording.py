"""One wording for every refusal, and the refusals a body makes without asking the
gate: judged by the policy after the fact, audited, logged with the rule and reason,
and kept to be told unless the tool result already said it."""

from __future__ import annotations

from pathlib import Path

import pytest

from chorus.bodies import PermissionAsk
from chorus.events import ToolCall, ToolResult
from chorus.policy import (
    POLICY_MARK,
    AuditLog,
    Policy,
    denial_notice,
    denial_text,
    is_told,
    policy_callback,
)


@pytest.fixture
def work(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    path.mkdir()
    return path


def test_a_refusal_names_the_rule_and_the_reason() -> None:
    text = denial_text("shell.denied_command", "`sudo ls` matches 'sudo'.", "shell")
    assert text == (
        "[Chorus policy] denied this shell call [shell.denied_command]: `sudo ls` matches "
        "'sudo'. Do not retry it or work around it; choose another approach or ask the user."
    )
    assert denial_text("filesystem.denied_path", "names '.env'").startswith(
        "[Chorus policy] denied this call [filesystem.denied_path]: names '.env'. "
    )
    assert is_told(f"Tool execution denied by policy. {text}", "shell.denied_command")
    assert not is_told(text, "mode.plan")
    assert not is_told("Permission to use Bash has been denied.", "shell.denied_command")
    notice = denial_notice([text])
    assert notice.startswith(POLICY_MARK)
    assert notice.endswith(f"\n- {text}")


def _call(call_id: str, command: str) -> ToolCall:
    return ToolCall(call_id=call_id, tool="shell", native_tool="exec_command",
                    input={"command": command}, body="codex-exec")  # fmt: skip


async def test_a_call_the_body_refused_gets_the_policy_s_reason(work: Path) -> None:
    audit = AuditLog()
    gate = policy_callback(Policy(), audit, cwd=work, session_id="s1")
    gate.observe(_call("c1", "cat .env"))
    denied = ToolResult(call_id="c1", output="cat: .env: Permission denied", is_error=True)
    decision = gate.refusal(denied)
    assert decision is not None
    assert (decision.request_id, decision.decision, decision.source) == ("c1", "deny", "policy")
    assert decision.reason is not None
    assert is_told(decision.reason, "filesystem.denied_path")
    assert gate.take_denials(told=True) == [decision.reason]  # not told by the body
    entry = [e for e in audit.entries() if e.kind == "policy_denial"][-1]
    assert (entry.session_id, entry.data["source"], entry.data["told"]) == ("s1", "body", False)
    assert entry.data["rule"] == "filesystem.denied_path"


async def test_a_refusal_already_in_the_tool_result_is_not_told_twice(work: Path) -> None:
    gate = policy_callback(Policy(), AuditLog(), cwd=work)
    gate.observe(_call("c2", "sudo ls"))
    stub = denial_text("shell.denied_command", "`sudo` is a denied command", "shell")
    decision = gate.refusal(ToolResult(call_id="c2", output=stub, is_error=True, exit_code=126))
    assert decision is not None
    assert gate.take_denials() == []


async def test_success_a_policy_allow_or_an_asked_call_is_no_refusal(work: Path) -> None:
    gate = policy_callback(Policy(), AuditLog(), cwd=work)
    gate.observe(_call("ok", "cat .env"))
    assert gate.refusal(ToolResult(call_id="ok", output="", is_error=False)) is None
    gate.observe(_call("fine", "ls"))
    assert gate.refusal(ToolResult(call_id="fine", output="x", is_error=True)) is None
    ask = PermissionAsk("claude", "shell", "Bash", {"command": "sudo ls"}, call_id="asked")
    answer = await gate(ask)
    gate.observe(_call("asked", "sudo ls"))
    assert gate.refusal(ToolResult(call_id="asked", output="no", is_error=True)) is None
    # The gate's own refusal waits to be told, unless the body carries it (Claude).
    assert gate.take_denials(told=True) == []
    again = await gate(PermissionAsk("codex", "shell", "x", {"command": "sudo ls"}))
    assert gate.take_denials() == [again.reason]
    assert again.reason == answer.reason
    assert gate.refusal(ToolResult(call_id="never-called", is_error=True)) is None
