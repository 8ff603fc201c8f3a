"""Offline environment builders: minimal env, config files, no leaks."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from chorus.testing import (
    CLIS,
    CODEX_KEY_VAR,
    CODEX_OFFLINE_FLAGS,
    Cli,
    headless_argv,
    offline_env,
    prepare_cli,
)

URL = "http://127.0.0.1:4321"


@pytest.mark.parametrize("cli", CLIS)
def test_env_is_minimal_and_leaks_nothing(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-real-secret")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-real-secret")
    monkeypatch.setenv("GEMINI_API_KEY", "real-secret")
    monkeypatch.setenv("HOME", "/root/real-home")
    env = offline_env(cli, tmp_path / "home", URL)

    assert env["HOME"] == str(tmp_path / "home")
    assert "sk-real-secret" not in env.values()
    assert "real-secret" not in env.values()
    assert not any("/root/real-home" in value for value in env.values())
    assert env["PATH"]
    assert {"PATH", "LANG", "TERM", "HOME", "TMPDIR"} <= set(env)
    assert Path(env["TMPDIR"]).is_dir()


def test_claude_env(tmp_path: Path) -> None:
    env = offline_env("claude", tmp_path, URL)
    assert env["ANTHROPIC_BASE_URL"] == URL
    assert env["ANTHROPIC_API_KEY"] == "dummy"
    for flag in ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "DISABLE_AUTOUPDATER"):
        assert env[flag] == "1"
    assert env["DISABLE_TELEMETRY"] == env["IS_SANDBOX"] == "1"
    assert env["CLAUDE_CODE_MAX_RETRIES"] == "0"
    assert "CLAUDE_CODE_MAX_RETRIES" not in offline_env("claude", tmp_path, URL, max_retries=None)


def test_codex_config_file(tmp_path: Path) -> None:
    env = offline_env("codex", tmp_path, URL + "/lanes/a", max_retries=2)
    config = tomllib.loads((Path(env["CODEX_HOME"]) / "config.toml").read_text())
    assert config["model"] == "gpt-5.5"
    assert config["model_provider"] == "fake"
    provider = config["model_providers"]["fake"]
    assert provider["base_url"] == URL + "/lanes/a/v1"
    assert provider["wire_api"] == "responses"
    assert provider["env_key"] == CODEX_KEY_VAR
    assert provider["request_max_retries"] == provider["stream_max_retries"] == 2
    assert env[CODEX_KEY_VAR] == "dummy"

    defaults = offline_env("codex", tmp_path / "d", URL, max_retries=None)
    provider = tomllib.loads((Path(defaults["CODEX_HOME"]) / "config.toml").read_text())
    assert "request_max_retries" not in provider["model_providers"]["fake"]


def test_gemini_settings_file(tmp_path: Path) -> None:
    env = offline_env("gemini", tmp_path, URL + "/")
    settings = json.loads((tmp_path / ".gemini" / "settings.json").read_text())
    assert settings["security"]["auth"]["selectedType"] == "gemini-api-key"
    assert settings["security"]["folderTrust"]["enabled"] is False
    assert settings["telemetry"]["enabled"] is False
    assert settings["privacy"]["usageStatisticsEnabled"] is False
    assert settings["general"]["enableAutoUpdate"] is False
    assert settings["general"]["maxAttempts"] == 1
    assert settings["ide"]["enabled"] is False
    assert env["GOOGLE_GEMINI_BASE_URL"] == URL
    assert env["GEMINI_API_KEY"] == "dummy"
    assert env["GEMINI_CLI_HOME"] == str(tmp_path)
    assert env["GEMINI_CLI_NO_RELAUNCH"] == "true"

    offline_env("gemini", tmp_path / "more", URL, max_retries=3)
    more = json.loads((tmp_path / "more" / ".gemini" / "settings.json").read_text())
    assert more["general"]["maxAttempts"] == 4


def test_headless_argv() -> None:
    assert headless_argv("claude", "/bin/claude", "go") == [
        "/bin/claude",
        "-p",
        "go",
        "--output-format",
        "stream-json",
        "--verbose",
        "--dangerously-skip-permissions",
    ]
    codex = headless_argv("codex", "/bin/codex", "go")
    assert codex[:3] == ["/bin/codex", "exec", "--json"]
    assert codex[-1] == "go"
    assert "--dangerously-bypass-approvals-and-sandbox" in codex
    assert list(CODEX_OFFLINE_FLAGS) == codex[3 : 3 + len(CODEX_OFFLINE_FLAGS)]
    gemini = headless_argv("gemini", "/bin/gemini", "go")
    assert gemini[-3:] == ["--yolo", "-m", "gemini-2.5-flash"]


def test_prepare_cli_makes_dirs(tmp_path: Path) -> None:
    rig = prepare_cli("gemini", tmp_path / "r", URL, executable="/bin/gemini")
    assert rig.cwd.is_dir()
    assert rig.home == tmp_path / "r" / "home"
    assert rig.argv("x")[0] == "/bin/gemini"
