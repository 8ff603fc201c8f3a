"""Where each front's client is asked (sans-I/O): the tables below are what Claude
Code 2.1.330 itself put to an SDK program's ``can_use_tool`` callback, run offline
against the scripted model server (the same calls, modes and allow rules)."""

from __future__ import annotations

from pathlib import Path

import pytest

from chorus.fronts import ClaudeRules, CodexRules, Roots
from chorus.fronts._rules import claude_input, claude_tool, shell_reach, unwrap_shell

#: Commands Claude Code asked about in ``default`` mode (the rest it ran unasked).
ASKED_IN_DEFAULT = {
    "find . -delete",
    "cat /etc/passwd",
    "ls /",
    "python3 -c 1",
    "ls && rm -f zz",
    "touch t",
    "rm -f a.txt",
    "cp a.txt z.txt",
    "echo x > /tmp/xout",
    "cd .. && ls",
    "env",
    "echo hi > b.txt",
    "mkdir d1",
}
#: ... and in ``acceptEdits`` mode.
ASKED_IN_ACCEPT_EDITS = {
    "find . -delete",
    "cat /etc/passwd",
    "ls /",
    "python3 -c 1",
    "echo x > /tmp/xout",
    "cd .. && ls",
    "env",
}
NOT_ASKED = [
    "echo hi",
    "pwd",
    "git status",
    "find . -name x",
    "grep -r alpha .",
    "sort a.txt",
    "cat a.txt | wc -l",
    "sed -n 1p a.txt",
    "head a.txt",
    "date",
    "sleep 0",
    "ls",
    "cat a.txt",
]


@pytest.fixture
def work(tmp_path: Path) -> Path:
    (tmp_path / "a.txt").write_text("alpha\n")
    return tmp_path


@pytest.mark.parametrize(
    ("mode", "asked"), [("default", ASKED_IN_DEFAULT), ("acceptEdits", ASKED_IN_ACCEPT_EDITS)]
)
def test_shell_commands_ask_as_claude_code_did(work: Path, mode: str, asked: set[str]) -> None:
    rules = ClaudeRules.of(str(work), mode)
    for command in [*NOT_ASKED, *ASKED_IN_DEFAULT]:
        decision = rules.decide("Bash", {"command": command}).decision
        assert decision == ("ask" if command in asked else "allow"), command


def test_tools_ask_as_claude_code_did(work: Path) -> None:
    calls = [
        ("Read", {"file_path": str(work / "a.txt")}),
        ("Read", {"file_path": "/etc/hostname"}),
        ("Bash", {"command": "ls"}),
        ("Bash", {"command": "echo hi > b.txt"}),
        ("Write", {"file_path": str(work / "c.txt"), "content": "gamma"}),
        ("Edit", {"file_path": str(work / "a.txt"), "old_string": "a", "new_string": "b"}),
        ("WebFetch", {"url": "http://127.0.0.1:9/x", "prompt": "p"}),
        ("TodoWrite", {"todos": []}),
    ]

    def asked(rules: ClaudeRules) -> list[str]:
        return [
            f"{t}:{i.get('command', '')}" for t, i in calls if rules.decide(t, i).decision == "ask"
        ]

    assert asked(ClaudeRules.of(str(work), "default")) == [
        "Read:",
        "Bash:echo hi > b.txt",
        "Write:",
        "Edit:",
        "WebFetch:",
    ]
    assert asked(ClaudeRules.of(str(work), "acceptEdits")) == ["Read:", "WebFetch:"]
    allowed = ["Bash(ls:*)", "Read", "Write", "WebFetch(domain:127.0.0.1)"]
    assert asked(ClaudeRules.of(str(work), "default", allowed)) == ["Bash:echo hi > b.txt", "Edit:"]
    assert asked(ClaudeRules.of(str(work), "bypassPermissions")) == []


def test_allow_and_deny_rules(work: Path) -> None:
    rules = ClaudeRules.of(
        str(work),
        "default",
        ["Bash(git diff:*)", "Edit(src/**)", "mcp__probe"],
        disallowed=["Bash(rm:*)", "WebSearch"],
    )
    assert rules.decide("Bash", {"command": "git diff --stat"}).decision == "allow"
    assert rules.decide("Bash", {"command": "git diff && git push"}).decision == "ask"
    assert rules.decide("Bash", {"command": "git diff > out.txt"}).decision == "ask"
    assert rules.decide("Edit", {"file_path": str(work / "src" / "m.py")}).decision == "allow"
    assert rules.decide("Edit", {"file_path": str(work / "other.py")}).decision == "ask"
    assert rules.decide("mcp__probe__lookup_code", {}).decision == "allow"
    assert rules.decide("mcp__other__x", {}).decision == "ask"
    denied = rules.decide("Bash", {"command": "rm -rf x"})
    assert denied.decision == "deny"
    assert "disallowedTools" in denied.reason
    assert rules.decide("WebSearch", {"query": "x"}).decision == "deny"
    rules.mode = "bypassPermissions"
    assert rules.decide("Bash", {"command": "rm -rf x"}).decision == "deny"  # deny rules hold
    rules.mode = "dontAsk"
    assert rules.decide("Bash", {"command": "python3 x.py"}).decision == "deny"


def test_always_allow_adds_claude_codes_rule(work: Path) -> None:
    rules = ClaudeRules.of(str(work), "default")
    rules.allow_always("Bash", {"command": "make test"})
    assert rules.decide("Bash", {"command": "make test"}).decision == "allow"
    assert rules.decide("Bash", {"command": "make deploy"}).decision == "ask"


def test_a_link_out_of_the_folder_is_outside(
    work: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    outside = tmp_path_factory.mktemp("outside")
    (work / "door").symlink_to(outside)
    roots = Roots(str(work))
    assert not roots.inside("door/x")
    assert shell_reach("cat door/x", roots) == "other"
    assert shell_reach("cat a.txt", roots) == "read"
    assert shell_reach("mkdir -p d && touch d/x", roots) == "edit"
    assert shell_reach("echo $(rm -rf /)", roots) == "other"
    assert shell_reach("sudo ls", roots) == "other"
    assert shell_reach("ls 'unclosed", roots) == "other"


def test_calls_are_named_as_claude_code_names_them() -> None:
    assert claude_tool("shell", "commandExecution") == "Bash"
    assert claude_tool("shell", "run_shell_command") == "Bash"
    assert claude_tool("write", "write_file") == "Write"
    assert claude_tool("mcp", "mcp__probe__lookup") == "mcp__probe__lookup"
    assert claude_tool("mcp", "mcp_probe_lookup") == "mcp__probe__lookup"
    assert unwrap_shell("/bin/bash -lc 'echo hi > x'") == "echo hi > x"
    assert unwrap_shell("ls -l") == "ls -l"
    shaped = claude_input("Bash", {"command": "/bin/bash -lc 'ls'", "cwd": "/w"})
    assert shaped == {"command": "ls", "cwd": "/w"}
    edit = claude_input("Edit", {"changes": [{"path": "/w/a.py", "kind": "update"}]})
    assert edit["file_path"] == "/w/a.py"


def test_codex_asks_by_approval_policy_and_sandbox(work: Path) -> None:
    def rules(approval: str, sandbox: str, reviewer: str = "user") -> CodexRules:
        return CodexRules(Roots(str(work)), approval, sandbox, reviewer)

    write, read = {"command": "echo x > y.txt"}, {"command": "cat a.txt"}
    outside = {"command": "echo x > /tmp/elsewhere"}
    untrusted = rules("untrusted", "workspace-write")
    assert untrusted.needs_approval("shell", write)
    assert not untrusted.needs_approval("shell", read)
    assert untrusted.needs_approval("edit", {"changes": [{"path": str(work / "y")}]})
    on_request = rules("on-request", "workspace-write")
    assert not on_request.needs_approval("shell", write)
    assert on_request.needs_approval("shell", outside)
    assert on_request.needs_approval("shell", {"command": "curl https://example.com"})
    assert not on_request.needs_approval("edit", {"changes": [{"path": str(work / "y")}]})
    assert rules("on-request", "read-only").needs_approval("shell", write)
    assert not rules("on-request", "danger-full-access").needs_approval("shell", outside)
    assert not rules("never", "read-only").needs_approval("shell", write)
    assert not rules("untrusted", "read-only", "auto_review").needs_approval("shell", write)
    untrusted.accepted.add("echo x > y.txt")
    assert not untrusted.needs_approval("shell", {"command": "bash -lc 'echo x > y.txt'"})
