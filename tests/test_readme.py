"""The README's configuration example is a valid config.toml, and the Quick start
names the commands that .ci/run uses."""

from __future__ import annotations

from pathlib import Path

import pytest

from chorus.config import BrainConfig, chorus_home, load_config
from chorus.gateway import BrainUrlError, check_brain_url

ROOT = Path(__file__).resolve().parents[1]


def test_readme_config_example_validates() -> None:
    readme = (ROOT / "README.md").read_text()
    block = readme.split("## Configuration", 1)[1].split("```toml", 1)[1].split("```", 1)[0]
    home = chorus_home()
    home.mkdir(parents=True)
    (home / "config.toml").write_text(block)
    config = load_config()
    assert config.agents["my-agent"].protocol == "acp"
    assert config.router.strategy == "smart"


def test_quick_start_is_two_commands_and_ci_runs_the_test_one() -> None:
    readme = (ROOT / "README.md").read_text()
    quick = readme.split("## Quick start", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    commands = [line.split("#")[0].strip() for line in quick.strip().splitlines()]
    assert commands == ["./run demo", "./run test"]
    assert "./run test" in (ROOT / ".ci" / "run").read_text()


def test_readme_url_allowlist_matches_a_url_with_a_path() -> None:
    readme = (ROOT / "README.md").read_text()
    block = readme.split("## Configuration", 1)[1].split("```toml", 1)[1].split("```", 1)[0]
    home = chorus_home()
    home.mkdir(parents=True)
    (home / "config.toml").write_text(block)
    brain = BrainConfig.model_validate(load_config().brain)
    assert check_brain_url("wss://brain.example.com/ucp", brain, environ={})
    assert check_brain_url("wss://brain.example.com/", brain, environ={})
    with pytest.raises(BrainUrlError):
        check_brain_url("wss://brain.example.com.evil.net/ucp", brain, environ={})
