"""Nothing of CHORUS_HOME is open to others: the folder is 0700 (tightened when it
was not), and a policy others can write is refused."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from chorus._errors import ConfigError
from chorus.config import private_home
from chorus.policy import load_policy


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_new_home_is_private(chorus_home: Path) -> None:
    assert not chorus_home.exists()
    assert _mode(private_home()) == 0o700


def test_an_open_home_is_tightened(chorus_home: Path) -> None:
    chorus_home.mkdir(mode=0o755)
    os.chmod(chorus_home, 0o755)
    private_home()
    assert _mode(chorus_home) == 0o700


@pytest.mark.parametrize("mode", [0o666, 0o620, 0o602])
def test_a_policy_others_can_write_is_refused(chorus_home: Path, mode: int) -> None:
    path = chorus_home / "policy.toml"
    chorus_home.mkdir()
    path.write_text("version = 1\n")
    os.chmod(path, mode)
    with pytest.raises(ConfigError, match="chmod 600"):
        load_policy(path)


def test_a_private_policy_loads(chorus_home: Path) -> None:
    path = chorus_home / "policy.toml"
    chorus_home.mkdir()
    path.write_text('version = 1\nmode = "plan"\n')
    os.chmod(path, 0o644)
    assert load_policy(path).mode == "plan"


def test_the_daemon_makes_its_home_private(chorus_home: Path) -> None:
    chorus_home.mkdir(mode=0o755)
    os.chmod(chorus_home, 0o755)
    run = [sys.executable, "-m", "chorus"]
    try:
        started = subprocess.run([*run, "start"], capture_output=True, text=True, timeout=60)
        assert started.returncode == 0, started.stderr
        assert _mode(chorus_home) == 0o700
        assert _mode(chorus_home / "policy.toml") == 0o600
    finally:
        subprocess.run([*run, "stop"], capture_output=True, timeout=60)
