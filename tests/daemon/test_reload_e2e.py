"""``chorus reload`` (issue 26): the running daemon takes a changed config.toml and
policy.toml, says which settings need a restart, and refuses a bad file (exit 2,
the key named, nothing applied)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest

from chorus.events import PermissionDecision, Routed
from chorus.testing import shell, text

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
