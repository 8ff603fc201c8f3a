"""``chorus reload``: the running daemon takes a changed config.toml and
policy.toml, says which settings need a restart, and refuses a bad file (exit 2,
the key named, nothing applied)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest

from chorus.events import PermissionDecision, Routed
from chorus.testing import offline_env, shell, text

if TYPE_CHECKING:
    from conftest import Daemon

pytestmark = pytest.mark.e2e


def test_reload_applies_router_and_policy_and_names_what_needs_a_restart(
    daemon_with: Callable[..., Daemon],
) -> None:
    daemon = daemon_with()
    daemon.server.script([shell("touch before.txt"), text("ok")], lane="claude")
    first = daemon.ask("Rename foo to bar", "--body", "claude")
    assert (daemon.work / "before.txt").exists()
    assert [e.to_body for e in first if isinstance(e, Routed)] == ["claude"]

    config = daemon.home / "config.toml"
    raised = config.read_text().replace("[daemon]\n", "[daemon]\nsession_idle_timeout_s = 5\n")
    config.write_text(raised + '[router]\nstrategy = "claude_only"\n')
    policy = daemon.home / "policy.toml"
    policy.write_text(
        policy.read_text().replace("denied_commands = [\n", 'denied_commands = [\n  "touch",\n')
    )
    done = daemon.run("reload", "--json")
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert "router.strategy" in answer["applied"]
    assert answer["restart_needed"] == ["daemon.session_idle_timeout_s"]

    daemon.server.script([shell("touch after.txt"), text("could not")], lane="claude")
    second = daemon.ask("Rename bar to baz")  # structured work: gemini, but claude_only now
    routed = [e for e in second if isinstance(e, Routed)]
    assert [(r.to_body, r.strategy) for r in routed] == [("claude", "claude_only")]
    denied = [e for e in second if isinstance(e, PermissionDecision) and e.decision == "deny"]
    assert denied, "the reloaded policy denies touch"
    assert not (daemon.work / "after.txt").exists()


def test_a_bad_policy_is_refused_with_its_key_and_nothing_applies(
    daemon_with: Callable[..., Daemon],
) -> None:
    daemon = daemon_with()
    assert daemon.run("start").returncode == 0
    policy = daemon.home / "policy.toml"
    policy.write_text(policy.read_text().replace("[shell]\n", "[shell]\nbogus_key = 1\n"))
    done = daemon.run("reload")
    assert done.returncode == 2
    assert "shell.bogus_key" in done.stderr
    config = daemon.home / "config.toml"
    config.write_text(config.read_text() + '[router]\nstrategy = "bogus"\n')
    done = daemon.run("reload", "--json")
    assert done.returncode == 2
    assert "router.strategy" in done.stderr
    status = daemon.run("status", "--json")
    assert json.loads(status.stdout)["daemon"] == "running"  # still up, as it was


def _acp_agent(daemon: Daemon, name: str, lane: str) -> str:
    """``[agents.<name>]``: the real claude-code-acp adapter under a name of its own,
    pointed at ``lane`` of the scripted server."""
    env = offline_env("claude", daemon.work.parent / f"{name}-home", daemon.server.lane_url(lane))
    lines = [f"[agents.{name}]", 'protocol = "acp"', 'command = "claude-code-acp"']
    lines += [f"[agents.{name}.env]", *(f"{k} = {json.dumps(v)}" for k, v in env.items())]
    return "\n".join(lines) + "\n"


def test_reload_adds_changes_and_removes_an_acp_agent_without_a_restart(
    daemon_with: Callable[..., Daemon],
) -> None:
    daemon = daemon_with()
    config = daemon.home / "config.toml"
    base = config.read_text()
    assert daemon.run("start").returncode == 0
    pid = daemon.client.status()["pid"]

    config.write_text(base + _acp_agent(daemon, "mine", "first"))
    added = daemon.run("reload")
    assert added.returncode == 0, added.stderr
    assert "applied: agents.mine.*" in added.stdout
    assert "agents added: mine" in added.stdout
    daemon.server.script([text("hello from mine")], lane="first")
    first = daemon.ask("say hello", "--body", "mine")
    assert [e.to_body for e in first if isinstance(e, Routed)] == ["mine"]
    assert len(daemon.server.turn_requests(lane="first")) == 1
    session = first[-1].session_id

    # Changed: the idle body of the session is closed; its next turn starts anew.
    config.write_text(base + _acp_agent(daemon, "mine", "second"))
    changed = json.loads(daemon.run("reload", "--json").stdout)
    assert changed["agents"] == {"added": [], "changed": ["mine"], "removed": []}
    assert changed["bodies"]["closed"] == [session]
    # (twice: under load the resumed adapter was once seen to send its turn again)
    daemon.server.script([text("hello again"), text("hello again")], lane="second")
    again = daemon.ask("once more", "--session", session)
    assert "hello again" in [getattr(e, "text", None) for e in again]
    assert daemon.server.turn_requests(lane="second")  # the new settings
    assert len(daemon.server.turn_requests(lane="first")) == 1  # not the old body

    config.write_text(base)
    removed = json.loads(daemon.run("reload", "--json").stdout)
    assert removed["agents"]["removed"] == ["mine"]
    gone = daemon.run("ask", "hi", "--body", "mine")
    assert gone.returncode == 2
    assert "unknown body 'mine'" in gone.stderr
    assert daemon.client.status()["pid"] == pid  # the same daemon throughout
