"""The README's configuration example is a valid config.toml, and the Quick start
names the commands that .ci/run uses."""

from __future__ import annotations

from pathlib import Path

from chorus.config import chorus_home, load_config

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
