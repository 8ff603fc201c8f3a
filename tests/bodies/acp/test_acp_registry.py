"""The ACP agent registry: built-ins, config.toml entries and overrides."""

from __future__ import annotations

from pathlib import Path

import pytest

from chorus import AgentNotFoundError, ConfigError, UnknownBodyError
from chorus.bodies import BodyOptions, Support
from chorus.bodies.acp import (
    ACP_CAPABILITIES,
    BUILTIN_AGENTS,
    GEMINI_QUIRKS,
    AcpBody,
    acp_agent,
    acp_agents,
    open_acp_body,
)
from chorus.config import load_config


def _config(home: Path, text: str) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(text)


def test_builtins() -> None:
    assert set(BUILTIN_AGENTS) == {"gemini", "claude-code-acp", "codex-acp"}
    gemini = acp_agent("gemini")
    assert (gemini.command, gemini.args, gemini.quirks) == (
        "gemini",
        ("--acp", "--debug"),
        GEMINI_QUIRKS,
    )
    assert gemini.capabilities.resume is Support.NATIVE  # session/load, its chat file spared
    assert gemini.capabilities.rate_limit_signal is Support.NATIVE
    assert acp_agent("codex-acp").package == "@zed-industries/codex-acp"
    assert acp_agent("claude-code-acp").capabilities == ACP_CAPABILITIES


def test_config_adds_and_overrides(chorus_home: Path) -> None:
    _config(
        chorus_home,
        '[agents.mine]\nprotocol = "acp"\ncommand = "/opt/mine"\nargs = ["--stdio"]\n'
        'env = { MINE_KEY = "k" }\n'
        '[agents.gemini]\ncommand = "/opt/gemini"\nenv = { GEMINI_API_KEY = "x" }\n'
        '[agents.claude]\ncommand = "/opt/claude"\n',
    )
    mine = acp_agent("mine")
    assert (mine.command, mine.args, dict(mine.env)) == (
        "/opt/mine",
        ("--stdio",),
        {"MINE_KEY": "k"},
    )
    gemini = acp_agent("gemini")
    assert (gemini.command, gemini.args) == ("/opt/gemini", ("--acp", "--debug"))
    assert dict(gemini.env) == {"GEMINI_API_KEY": "x"}
    assert gemini.quirks == GEMINI_QUIRKS
    assert set(acp_agents()) == {"gemini", "claude-code-acp", "codex-acp", "mine"}
    with pytest.raises(UnknownBodyError, match="protocol"):
        acp_agent("claude", load_config())
    with pytest.raises(UnknownBodyError):
        acp_agent("nobody")


def test_config_entry_needs_a_command(chorus_home: Path) -> None:
    _config(chorus_home, '[agents.empty]\nprotocol = "acp"\n')
    with pytest.raises(ConfigError, match="needs a command"):
        acp_agent("empty")


def test_open_acp_body_carries_the_agents_declaration(tmp_path: Path) -> None:
    body = open_acp_body("gemini", BodyOptions(cwd=tmp_path))
    assert isinstance(body, AcpBody)
    caps = type(body).capabilities
    assert (type(body).name, caps.rate_limit_signal) == ("gemini", Support.NATIVE)
    other = open_acp_body("codex-acp", BodyOptions(cwd=tmp_path))
    assert type(other).name == "codex-acp"
    assert type(other).capabilities.rate_limit_signal is not Support.NATIVE
    assert type(other) is type(open_acp_body("codex-acp", BodyOptions(cwd=tmp_path)))


def test_missing_executable_names_the_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("CHORUS_AGENTS_DIR", str(tmp_path / "agents"))
    with pytest.raises(AgentNotFoundError, match="@zed-industries/claude-code-acp"):
        acp_agent("claude-code-acp").executable()


def test_a_configured_name_must_be_a_plain_body_name(chorus_home: Path) -> None:
    _config(chorus_home, '[agents."../x"]\nprotocol = "acp"\ncommand = "/opt/x"\n')
    with pytest.raises(ConfigError, match="body name"):
        acp_agent("../x")


def test_an_acp_entry_may_not_take_a_builtin_bodys_name(chorus_home: Path) -> None:
    from chorus.bodies import body_names

    _config(chorus_home, '[agents.claude]\nprotocol = "acp"\ncommand = "claude-code-acp"\n')
    with pytest.raises(ConfigError, match=r"agents\.claude\.protocol"):
        body_names(load_config())
    _config(chorus_home, '[agents.gemini]\nprotocol = "acp"\ncommand = "/opt/gemini"\n')
    assert "gemini" in body_names(load_config())  # Gemini's body is ACP already


def test_an_entry_without_protocol_is_named_in_the_unknown_body_error(chorus_home: Path) -> None:
    from chorus.bodies import body_class, check_installed

    _config(chorus_home, '[agents.mine]\ncommand = "/opt/mine"\n')
    with pytest.raises(UnknownBodyError, match=r'\[agents\.mine\] has no protocol = "acp"'):
        check_installed("mine", load_config())
    with pytest.raises(UnknownBodyError, match="known bodies: claude"):
        body_class("nobody", load_config())


def test_the_registry_reads_the_config_it_is_given() -> None:
    """A daemon's reload passes a new config: its agents count at once."""
    from chorus.bodies import body_names
    from chorus.config import ChorusConfig

    before = ChorusConfig()
    after = ChorusConfig.model_validate(
        {"agents": {"mine": {"protocol": "acp", "command": "/opt/mine"}}}
    )
    assert "mine" not in body_names(before)
    assert "mine" in body_names(after)
    assert acp_agent("mine", after).command == "/opt/mine"
