"""Pinned agent CLI install (idempotent) and lookup order."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from chorus import AgentNotFoundError, ChorusError
from chorus.agents import PINNED, agents_dir, describe_agents, find_agent, install_agents

_FAKE_NPM = """#!/bin/sh
# Records its arguments, then lays out package.json files as npm would.
echo "$@" >> "$NPM_LOG"
prefix=""
while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) prefix="$2"; shift 2 ;;
    @*@*) spec="$1"; name="${spec%@*}"; ver="${spec##*@}"
          dir="$prefix/node_modules/$name"; mkdir -p "$dir"
          printf '{"name":"%s","version":"%s"}' "$name" "$ver" > "$dir/package.json"
          shift ;;
    *) shift ;;
  esac
done
"""


@pytest.fixture
def fake_npm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    npm = bindir / "npm"
    npm.write_text(_FAKE_NPM)
    npm.chmod(npm.stat().st_mode | stat.S_IEXEC)
    log = tmp_path / "npm.log"
    monkeypatch.setenv("NPM_LOG", str(log))
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("CHORUS_AGENTS_DIR", str(tmp_path / "agents"))
    return log


def test_install_runs_npm_once_with_pins_then_is_idempotent(fake_npm: Path) -> None:
    first = install_agents()
    assert all(now for _, now in first)
    calls = fake_npm.read_text().splitlines()
    assert len(calls) == 1
    for agent in PINNED:
        assert f"{agent.package}@{agent.version}" in calls[0]
    second = install_agents()
    assert not any(now for _, now in second)
    assert len(fake_npm.read_text().splitlines()) == 1


def test_wrong_version_is_reinstalled(fake_npm: Path) -> None:
    install_agents()
    manifest = agents_dir() / "node_modules" / "@openai/codex" / "package.json"
    manifest.write_text(json.dumps({"name": "@openai/codex", "version": "0.1.0"}))
    result = dict((a.name, now) for a, now in install_agents())
    assert result["codex"] is True
    assert not any(now for name, now in result.items() if name != "codex")


def test_npm_failure_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    npm = bindir / "npm"
    npm.write_text("#!/bin/sh\necho 'E404 no such package' >&2\nexit 1\n")
    npm.chmod(0o755)
    monkeypatch.setenv("PATH", str(bindir))
    monkeypatch.setenv("CHORUS_AGENTS_DIR", str(tmp_path / "agents"))
    with pytest.raises(ChorusError, match="E404"):
        install_agents()


def test_lookup_order_config_then_project_then_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CHORUS_AGENTS_DIR", str(tmp_path / "agents"))
    on_path = tmp_path / "pathbin" / "codex"
    on_path.parent.mkdir()
    on_path.write_text("#!/bin/sh\necho path-codex\n")
    on_path.chmod(0o755)
    monkeypatch.setenv("PATH", str(on_path.parent))
    assert find_agent("codex") == on_path

    local = tmp_path / "agents" / "node_modules" / ".bin" / "codex"
    local.parent.mkdir(parents=True)
    local.write_text("#!/bin/sh\necho local-codex\n")
    local.chmod(0o755)
    assert find_agent("codex") == local

    configured = tmp_path / "my-codex"
    configured.write_text("#!/bin/sh\necho 9.9.9\n")
    configured.chmod(0o755)
    home = Path(os.environ["CHORUS_HOME"])
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(f'[agents.codex]\ncommand = "{configured}"\n')
    assert find_agent("codex") == configured
    info = {i.name: i for i in describe_agents()}["codex"]
    assert (info.source, info.version) == ("config", "9.9.9")


def test_missing_agent_is_a_user_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHORUS_AGENTS_DIR", str(tmp_path / "none"))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(AgentNotFoundError, match="chorus agents install"):
        find_agent("gemini")
    assert {i.source for i in describe_agents()} == {"missing"}


def test_real_pinned_clis_are_installed() -> None:
    """The project's own install (done by ./run) gives the pinned versions."""
    versions = {i.name: i.version or "" for i in describe_agents()}
    assert versions["claude"].startswith("2.1.330")
    assert versions["codex"] == "codex-cli 0.169.0"
    assert versions["gemini"] == "0.61.0"
