"""Config and policy files that cannot work are refused before a daemon starts:
exit 2, the key at fault named, nothing started."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from chorus._errors import ConfigError
from chorus.client._checks import load_checked_config


@pytest.mark.parametrize(
    ("toml", "key"),
    [
        ('[router]\nstrategy = "bogus"\n', "router.strategy"),
        ('[router]\nstrategy = "nobody_only"\n', "router.strategy"),
        ('[router]\nbodies = ["claude", "clod"]\n', "router.bodies"),
        ('[router.matrix]\ndeep_thoughts = ["claude"]\n', "router.matrix.deep_thoughts"),
        ('[router.matrix]\ncreative = ["nobody"]\n', "router.matrix.creative"),
        ('[agents.mine]\ncommand = "x"\nprotocol = "acpx"\n', "agents.mine.protocol"),
        ("[budget]\ndaily_usd = -1\n", "budget.daily_usd"),
        ("[budget.bodies]\nclod = 5.0\n", "budget.bodies.clod"),
    ],
)
def test_a_config_the_router_cannot_use_names_its_key(
    chorus_home: Path, toml: str, key: str
) -> None:
    chorus_home.mkdir(parents=True)
    (chorus_home / "config.toml").write_text(toml)
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        load_checked_config()


def test_good_router_settings_pass(chorus_home: Path) -> None:
    chorus_home.mkdir(parents=True)
    (chorus_home / "config.toml").write_text(
        '[router]\nstrategy = "gemini_only"\nbodies = ["gemini", "claude"]\n'
        '[router.matrix]\ncreative = ["gemini"]\n'
    )
    assert load_checked_config().router.strategy == "gemini_only"


def _chorus(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "chorus", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=os.environ.copy(),
    )


@pytest.mark.parametrize("command", [("ask", "hi"), ("task", "hi"), ("start",), ("doctor",)])
def test_bad_files_exit_2_before_any_daemon(chorus_home: Path, command: tuple[str, ...]) -> None:
    chorus_home.mkdir(parents=True)
    (chorus_home / "config.toml").write_text('[router]\nstrategy = "bogus"\n')
    done = _chorus(*command)
    assert done.returncode == 2, done.stderr
    assert "router.strategy" in done.stderr
    assert not (chorus_home / "run").exists()


def test_bad_policy_names_its_key_and_starts_nothing(chorus_home: Path) -> None:
    chorus_home.mkdir(parents=True)
    (chorus_home / "policy.toml").write_text('mode = "default"\n[shell]\nmode = "sometimes"\n')
    done = _chorus("ask", "hi")
    assert done.returncode == 2, done.stderr
    assert "shell.mode" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (chorus_home / "run").exists()


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("--framework", "vote"), "unknown framework 'vote'"),
        (("--framework", "consensus", "--planners", "claude,nobody"), "unknown body 'nobody'"),
        (("--framework", "reflect", "--reviewer", "nobody"), "unknown body 'nobody'"),
    ],
)
def test_a_bad_framework_request_starts_nothing(
    chorus_home: Path, args: tuple[str, ...], said: str
) -> None:
    done = _chorus("ask", "hi", "--body", "claude", *args)
    assert done.returncode == 2, done.stderr
    assert said in done.stderr
    assert not chorus_home.exists()
