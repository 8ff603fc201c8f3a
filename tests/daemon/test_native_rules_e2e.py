"""each CLI's own rules, generated from policy.toml, refuse what the CLI would
approve without asking Chorus. The OS sandbox is OFF here, so only the CLI's rules
(and Chorus's callback for what the CLI does ask about) stand between the model and
the secret. Real CLIs, scripted model, through the daemon."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest

from chorus.policy import DEFAULT_POLICY_TOML
from chorus.testing import Reply, shell, text, tool_call, write_file

if TYPE_CHECKING:
    from conftest import Daemon

pytestmark = pytest.mark.e2e

SECRET = "".join(["native", "-secret-", "Q4v9"])
MARKER = "sudo-listed-this-marker"
SANDBOX_OFF = ("[sandbox]", 'mode = "off"')
#: The daemon this module's tests share (see ``shared_daemon``) runs without the sandbox.
SHARED_DAEMON_CONFIG = SANDBOX_OFF


def results(chorus: Daemon, lane: str) -> list[str]:
    """The tool result each model request after the first carried back."""
    out = []
    for request in chorus.server.turn_requests(lane=lane)[1:]:
        result = request.last_tool_result()
        out.append(json.dumps(result.content) if result is not None else "")
    return out


def run(chorus: Daemon, body: str, lane: str, mode: str, turns: list[Reply]) -> list[str]:
    (chorus.work / ".env").write_text(f"TOKEN={SECRET}\n")
    (chorus.work / MARKER).write_text("x")
    chorus.server.script([*turns, text("done")], lane=lane)
    done = chorus.run("ask", "go", "--body", body, "--permission-mode", mode, "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    assert SECRET not in done.stdout
    seen = results(chorus, lane)
    assert len(seen) == len(turns), seen
    return seen


@pytest.mark.parametrize("mode", ["default", "acceptEdits", "plan", "bypassPermissions"])
def test_claude_never_reads_a_denied_file_it_would_read_unasked(
    shared_daemon: Daemon, mode: str
) -> None:
    chorus = shared_daemon
    work = chorus.work
    read = tool_call("Read", {"file_path": str(work / ".env")})
    seen = run(chorus, "claude", "claude", mode, [read, shell("cat .env")])
    assert all(SECRET not in s for s in seen), seen
    # Claude asks Chorus about them (its ask rules), and the policy's reason is the answer.
    assert "[Chorus policy] denied this read call [filesystem.denied_path]" in seen[0]
    assert "[Chorus policy] denied this shell call [filesystem.denied_path]" in seen[1]


def test_claude_plan_mode_writes_nothing(shared_daemon: Daemon) -> None:
    chorus = shared_daemon
    target = str(chorus.work / "plan.txt")
    seen = run(chorus, "claude", "claude", "plan", [write_file(target, "planned\n")])
    assert not (chorus.work / "plan.txt").exists(), seen
    assert "plan mode" in seen[0]


def test_claude_still_reads_an_ordinary_file(shared_daemon: Daemon) -> None:
    """The deny rules are narrow: a file the policy does not deny is read as before."""
    chorus = shared_daemon
    (chorus.work / "notes.txt").write_text("ordinary-content-31\n")
    read = tool_call("Read", {"file_path": str(chorus.work / "notes.txt")})
    seen = run(chorus, "claude", "claude", "default", [read])
    assert "ordinary-content-31" in seen[0]


GEMINI_TRIES = [
    tool_call("read_file", {"file_path": ".env"}),
    shell("cat .env"),
    shell("cd .. && sudo ls ."),
]


def gemini_refused(seen: list[str], *, asked: bool) -> None:
    assert all(SECRET not in s and MARKER not in s for s in seen), seen
    # Without the generated policy file Gemini ran `cat .env` unasked (the secret
    # reached the model). One-shot Gemini refuses it and sudo by the file, with the
    # policy's reason; over ACP the file makes Gemini ask Chorus, which refuses them
    # (ACP's reject reads "canceled" to the model).
    for refused in seen[1:]:
        assert ("canceled" if asked else "denied by policy. [Chorus policy]") in refused, seen


@pytest.mark.parametrize("mode", ["default", "bypassPermissions"])
def test_gemini_refuses_denied_paths_and_commands_by_its_own_policy(
    shared_daemon: Daemon, mode: str
) -> None:
    chorus = shared_daemon
    gemini_refused(run(chorus, "gemini", "gemini", mode, GEMINI_TRIES), asked=True)


def test_gemini_headless_in_yolo_still_refuses_them(daemon_with: Callable[..., Daemon]) -> None:
    """One-shot Gemini offers its shell only with --yolo (bypassPermissions, which the
    policy must allow): the policy file still holds, Gemini approving all else."""
    chorus = daemon_with(*SANDBOX_OFF)
    policy = DEFAULT_POLICY_TOML.replace("allow_dangerous = false", "allow_dangerous = true")
    assert policy != DEFAULT_POLICY_TOML
    (chorus.home / "policy.toml").write_text(policy)
    (chorus.home / "policy.toml").chmod(0o600)
    seen = run(chorus, "gemini-headless", "gemini", "bypassPermissions", GEMINI_TRIES)
    gemini_refused(seen, asked=False)


def test_gemini_plan_mode_writes_nothing(shared_daemon: Daemon) -> None:
    """Plan mode is read-only on Gemini with the generated file in place (Gemini's own
    plan rules refuse this write too; the file's plan rule is a second layer)."""
    chorus = shared_daemon
    seen = run(chorus, "gemini", "gemini", "plan", [write_file("plan.txt", "planned\n")])
    assert not (chorus.work / "plan.txt").exists(), seen


def test_codex_plan_mode_asks_chorus_about_sudo_and_is_refused(
    shared_daemon: Daemon,
) -> None:
    """Codex's plan mode used approvalPolicy "never": ``sudo ls`` ran unasked in the
    read-only sandbox. Now Codex asks, and Chorus's policy refuses."""
    chorus = shared_daemon
    seen = run(chorus, "codex", "codex", "plan", [shell("sudo ls"), write_file("p.txt", "x\n")])
    # Refused before it ran (sudo may not even be installed: "command not found"
    # would mean Codex ran it unasked, as it did under "never").
    assert "rejected" in seen[0], seen
    assert "exited with code" not in seen[0], seen
    assert not (chorus.work / "p.txt").exists()
