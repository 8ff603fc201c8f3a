"""Finding the login an agent CLI would run with, as the CLI finds it, without
ever reading a secret's value beyond "is it set"."""

from __future__ import annotations

from pathlib import Path

import pytest

from chorus.agents import cli_family, find_login


@pytest.fixture
def bare(tmp_path: Path) -> dict[str, str]:
    """An environment with an empty home and no key at all."""
    home = tmp_path / "home"
    home.mkdir()
    return {"HOME": str(home), "PATH": "/usr/bin"}


@pytest.mark.parametrize("cli", ["claude", "codex", "gemini"])
def test_nothing_set_needs_a_login_with_what_to_do(cli: str, bare: dict[str, str]) -> None:
    login = find_login(cli, {}, bare)
    assert not login.usable
    assert login.describe().startswith("needs login: set ")


@pytest.mark.parametrize(
    ("cli", "var"),
    [("claude", "ANTHROPIC_API_KEY"), ("codex", "OPENAI_API_KEY"), ("gemini", "GEMINI_API_KEY")],
)
def test_a_key_in_the_agents_env_counts_and_is_never_shown(
    cli: str, var: str, bare: dict[str, str]
) -> None:
    login = find_login(cli, {var: "sk-secret-value-123"}, bare)
    assert (login.kind, login.source) == ("api key", f"{var} in [agents.*.env]")
    assert "sk-secret" not in login.describe() + str(login.as_dict())
    from_env = find_login(cli, {}, {**bare, var: "x"})
    assert from_env.source == f"{var} in the environment"


@pytest.mark.parametrize(
    ("cli", "path"),
    [("claude", ".claude/.credentials.json"), ("gemini", ".gemini/oauth_creds.json")],
)
def test_the_clis_own_login_file_in_its_home(cli: str, path: str, bare: dict[str, str]) -> None:
    creds = Path(bare["HOME"]) / path
    creds.parent.mkdir(parents=True)
    creds.write_text("{}")
    login = find_login(cli, {}, bare)
    assert (login.kind, login.source) == ("subscription", str(creds))


def test_codex_login_under_codex_home_and_its_providers(
    tmp_path: Path, bare: dict[str, str]
) -> None:
    codex_home = tmp_path / "codex"
    codex_home.mkdir()
    env = {**bare, "CODEX_HOME": str(codex_home)}
    assert not find_login("codex", {}, env).usable
    (codex_home / "config.toml").write_text(
        'model_provider = "mock"\n[model_providers.mock]\n'
        'base_url = "http://x"\nenv_key = "MOCK_KEY"\n'
    )
    assert not find_login("codex", {}, env).usable  # its key is not set
    assert find_login("codex", {"MOCK_KEY": "k"}, env).source == "MOCK_KEY in [agents.*.env]"
    (codex_home / "config.toml").write_text(
        'model_provider = "local"\n[model_providers.local]\nbase_url = "http://localhost:11434/v1"\n'
    )
    assert find_login("codex", {}, env).kind == "provider"  # a local server needs no key
    (codex_home / "config.toml").write_text("")
    (codex_home / "auth.json").write_text("{}")
    assert find_login("codex", {}, env).kind == "subscription"


def test_cloud_switches_and_unknown_agents(bare: dict[str, str]) -> None:
    assert find_login("claude", {"CLAUDE_CODE_USE_BEDROCK": "1"}, bare).kind == "cloud"
    assert not find_login("claude", {"CLAUDE_CODE_USE_BEDROCK": "0"}, bare).usable
    assert find_login("my-acp-agent", {}, bare).usable  # nothing Chorus can check


def test_families() -> None:
    assert [cli_family(n) for n in ("claude-code-acp", "codex-exec", "gemini", "mine")] == [
        "claude",
        "codex",
        "gemini",
        "mine",
    ]
