"""What a reload finds in two configs: agents added, changed, removed; the bodies
whose warm processes are stale; the keys a person is shown."""

from __future__ import annotations

from typing import Any

from chorus.cli._reload_cmd import shown_keys
from chorus.config import ChorusConfig
from chorus.daemon._reload import agent_changes, bodies_of, is_live


def _config(**agents: dict[str, Any]) -> ChorusConfig:
    return ChorusConfig.model_validate({"agents": agents})


def test_agent_changes_by_name() -> None:
    old = _config(claude={"env": {"A": "1"}}, gone={"protocol": "acp", "command": "x"})
    new = _config(claude={"env": {"A": "2"}}, mine={"protocol": "acp", "command": "y"})
    assert agent_changes(old, new) == {
        "added": ["mine"],
        "changed": ["claude"],
        "removed": ["gone"],
    }
    assert agent_changes(new, new) == {"added": [], "changed": [], "removed": []}


def test_the_bodies_of_an_agent_entry_are_those_that_run_its_cli() -> None:
    known = ["claude", "claude-print", "codex", "gemini", "gemini-headless", "mine"]
    assert bodies_of({"claude"}, known) == {"claude", "claude-print"}
    assert bodies_of({"gemini", "mine"}, known) == {"gemini", "gemini-headless", "mine"}
    assert bodies_of(set(), known) == set()


def test_a_whole_agent_is_shown_as_one_key() -> None:
    applied = ["agents.claude.env.X", "agents.mine.args", "agents.mine.command", "router.bodies"]
    agents = {"added": ["mine"], "changed": ["claude"], "removed": []}
    shown = shown_keys(applied, agents)
    assert shown == ["agents.claude.env.X", "agents.mine.*", "router.bodies"]


def test_agents_apply_live() -> None:
    assert is_live("agents.mine.command")
    assert not is_live("daemon.session_idle_timeout_s")
