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
    assert gemini.capabilities.resume is Support.UNSUPPORTED
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
    assert (type(body).name, type(body).capabilities.resume) == ("gemini", Support.UNSUPPORTED)
    other = open_acp_body("codex-acp", BodyOptions(cwd=tmp_path))
    assert type(other).name == "codex-acp"
    assert type(other) is type(open_acp_body("codex-acp", BodyOptions(cwd=tmp_path)))


def test_missing_executable_names_the_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("CHORUS_AGENTS_DIR", str(tmp_path / "agents"))
    with pytest.raises(AgentNotFoundError, match="@zed-industries/claude-code-acp"):
        acp_agent("claude-code-acp").executable()
