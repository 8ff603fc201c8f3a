"""``chorus init`` through the real CLI, without a daemon: what it finds, what it
writes, what it says to do, and a bad config.toml refused with nothing written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from chorus.cli._init_edit import MARKER

#: Every place a login may come from, emptied so the test decides which one there is.
LOGIN_VARS = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "CLAUDE_CODE_OAUTH_TOKEN",
    "CLAUDE_CODE_USE_BEDROCK",
    "CLAUDE_CODE_USE_VERTEX",
    "OPENAI_API_KEY",
    "CODEX_API_KEY",
    "CODEX_HOME",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "GOOGLE_GENAI_USE_VERTEXAI",
    "GOOGLE_GENAI_USE_GCA",
)


@pytest.fixture
def bare(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No login anywhere: an empty HOME and none of the login variables."""
    home = tmp_path / "empty-home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for var in LOGIN_VARS:
        monkeypatch.delenv(var, raising=False)
    return home


def chorus(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "chorus", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=os.environ.copy(),
    )


def init_json() -> dict[str, Any]:
    done = chorus("init", "--json")
    assert done.returncode == 0, done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def test_a_claude_key_makes_claude_the_body_and_a_second_run_changes_nothing(
    bare: Path, chorus_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "dummy-key-not-shown")
    report = init_json()
    config = chorus_home / "config.toml"
    assert config.read_text() == f'[router]\n{MARKER}\nbodies = ["claude"]\n'
    assert (report["changed"], report["router_bodies"]) == (True, ["claude"])
    states = {a["name"]: a["state"] for a in report["agents"]}
    assert states["claude"] == "ready: api key (ANTHROPIC_API_KEY in the environment)"
    assert states["codex"] == "needs login: set OPENAI_API_KEY, or run `codex login`"
    assert states["gemini"].startswith("needs login: set GEMINI_API_KEY")
    assert "codex: needs login: set OPENAI_API_KEY, or run `codex login`" in report["todo"]
    assert report["daemon"] == {"daemon": "not running", "applied": [], "restart_needed": []}
    assert "dummy-key-not-shown" not in json.dumps(report)
    written = config.read_bytes()
    again = chorus("init")
    assert again.returncode == 0, again.stderr
    assert "unchanged" in again.stdout
    assert "already up to date" in again.stdout
    assert config.read_bytes() == written
    assert "dummy-key-not-shown" not in again.stdout + again.stderr
    status = json.loads(chorus("integrity", "status", "--json").stdout)
    assert [f["ok"] for f in status["files"] if f["name"] == "config.toml"] == [True]


def test_no_login_writes_nothing_and_says_what_to_do(bare: Path, chorus_home: Path) -> None:
    done = chorus("init")
    assert done.returncode == 0, done.stderr
    assert not (chorus_home / "config.toml").exists()
    assert "to do: claude: needs login: set ANTHROPIC_API_KEY" in done.stdout
    assert "nothing can run yet" in done.stdout


def test_a_missing_cli_is_told_to_install(
    bare: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "no-agents"
    empty.mkdir()
    monkeypatch.setenv("CHORUS_AGENTS_DIR", str(empty))
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    monkeypatch.setenv("GEMINI_API_KEY", "dummy")
    report = init_json()
    assert {a["name"]: a["state"] for a in report["agents"]}["gemini"] == (
        "not installed: chorus agents install"
    )
    assert report["router_bodies"] is None  # nothing installed can run
    assert "gemini: not installed: chorus agents install" in report["todo"]


def test_a_persons_settings_and_list_are_kept(
    bare: Path, chorus_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "dummy")
    monkeypatch.setenv("GEMINI_API_KEY", "dummy")
    chorus_home.mkdir()
    config = chorus_home / "config.toml"
    mine = '# mine\n[router]\nbodies = ["gemini"]  # gemini only\n[daemon]\nnotifications = false\n'
    config.write_text(mine)
    report = init_json()
    assert config.read_text() == mine
    assert (report["changed"], report["router_bodies_yours"]) == (False, True)
    assert (
        "claude is ready but not in your [router] bodies: add it there to route to it"
        in report["todo"]
    )


def test_a_config_that_does_not_parse_is_refused_untouched(
    bare: Path, chorus_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "dummy")
    chorus_home.mkdir()
    config = chorus_home / "config.toml"
    config.write_text("[router\nbodies = 1\n")
    done = chorus("init")
    assert done.returncode == 2
    assert "config.toml: not valid TOML" in done.stderr
    assert "Traceback" not in done.stderr
    assert config.read_text() == "[router\nbodies = 1\n"
    assert sorted(p.name for p in chorus_home.iterdir()) == ["config.toml"]


def test_a_policy_changed_since_its_baseline_is_not_blessed(
    bare: Path, chorus_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "dummy")
    assert chorus("reload").returncode == 0  # makes policy.toml and takes its baseline
    policy = chorus_home / "policy.toml"
    policy.write_text(policy.read_text().replace('mode = "default"', 'mode = "plan"'))
    report = init_json()
    assert report["changed"] is True
    assert report["daemon"]["daemon"] == "not reloaded"
    assert "policy.toml changed since its baseline" in report["daemon"]["why"]
    status = json.loads(chorus("integrity", "status", "--json").stdout)
    assert {f["name"]: f["ok"] for f in status["files"]} == {
        "SOUL.md": True,
        "MEMORY.md": True,
        "policy.toml": False,  # still the person's to look at
        "config.toml": True,  # init's edit is the baseline
    }
