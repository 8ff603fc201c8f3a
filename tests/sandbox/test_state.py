"""Where each CLI keeps its state (the only part of a body's home it may write),
found from the body's environment and made when missing."""

from __future__ import annotations

from pathlib import Path

import pytest

from chorus.sandbox._state import STATE, state_paths


def test_claude_keeps_its_state_in_its_folder_its_cache_and_its_json(tmp_path: Path) -> None:
    home = tmp_path / "home"
    found = state_paths("claude", {}, home)
    assert found.writable == (
        (home / ".claude").resolve(),
        (home / ".cache" / "claude-cli-nodejs").resolve(),
        (home / ".claude.json").resolve(),
    )
    assert found.read_only == ((home / ".claude" / "settings.json").resolve(),)
    assert (home / ".claude").is_dir()
    assert (home / ".claude.json").read_text() == "{}\n"  # made, so that it can be bound
    assert (home / ".claude" / "settings.json").read_text() == "{}\n"
    assert not (home / ".bashrc").exists()


def test_the_environment_moves_the_state(tmp_path: Path) -> None:
    config, cache, codex = tmp_path / "cfg", tmp_path / "xdg", tmp_path / "cx"
    env = {"CLAUDE_CONFIG_DIR": str(config), "XDG_CACHE_HOME": str(cache)}
    claude = state_paths("claude-code-acp", env, tmp_path / "home")
    assert claude.writable == (config, cache / "claude-cli-nodejs", config / ".claude.json")
    assert claude.read_only == (config / "settings.json",)
    assert state_paths("codex-acp", {"CODEX_HOME": str(codex)}, tmp_path).writable == (codex,)
    gemini = state_paths("gemini", {"GEMINI_CLI_HOME": str(tmp_path / "g")}, tmp_path / "home")
    assert gemini.writable == (tmp_path / "g" / ".gemini",)
    assert gemini.read_only == (tmp_path / "g" / ".gemini" / "settings.json",)
    assert not (tmp_path / "home").exists()


def test_existing_files_are_kept_as_they_are(tmp_path: Path) -> None:
    (tmp_path / ".codex").mkdir()
    (tmp_path / ".codex" / "config.toml").write_text('model = "x"\n')
    found = state_paths("codex", {}, tmp_path)
    assert found.read_only == ((tmp_path / ".codex" / "config.toml").resolve(),)
    assert (tmp_path / ".codex" / "config.toml").read_text() == 'model = "x"\n'


@pytest.mark.parametrize("cli", [None, "my-acp-agent"])
def test_a_cli_not_known_gets_no_state(tmp_path: Path, cli: str | None) -> None:
    found = state_paths(cli, {}, tmp_path)
    assert (found.writable, found.read_only) == ((), ())
    assert list(tmp_path.iterdir()) == []


def test_a_home_that_cannot_be_made_gives_nothing_to_bind(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    found = state_paths("gemini", {}, blocker / "home")
    assert (found.writable, found.read_only) == ((), ())


def test_every_adapter_shares_its_clis_state() -> None:
    assert STATE["claude-code-acp"] == STATE["claude"]
    assert STATE["codex-acp"] == STATE["codex"]


def test_an_acp_agent_of_the_config_keeps_the_state_of_the_cli_it_runs(tmp_path: Path) -> None:
    from chorus.sandbox import state_cli

    adapter = tmp_path / "node_modules" / "@zed-industries" / "claude-code-acp" / "index.js"
    adapter.parent.mkdir(parents=True)
    adapter.write_text("")
    link = tmp_path / "bin" / "mine"
    link.parent.mkdir()
    link.symlink_to(adapter)
    assert state_cli("mine", link) == "claude-code-acp"  # found through the link
    assert state_cli("codex", link) == "codex"  # a known body keeps its own
    assert state_cli("other", tmp_path / "bin" / "other-agent") == "other"
    assert state_cli("mine", None) == "mine"
