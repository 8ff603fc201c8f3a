"""``chorus service``: the unit file written for this home, and plain words when the
service manager cannot take it."""

from __future__ import annotations

import json
import os
import plistlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest


def chorus(tmp_path: Path, *args: str, path: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "xdg"), "HOME": str(tmp_path / "me")}
    if path is not None:
        env["PATH"] = path
    return subprocess.run(
        [sys.executable, "-m", "chorus", "service", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )


def test_install_writes_a_systemd_user_unit_for_this_home(
    tmp_path: Path, chorus_home: Path
) -> None:
    done = chorus(tmp_path, "install", "--kind", "systemd", "--no-start", "--json")
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    unit = Path(answer["path"])
    assert unit.parent == tmp_path / "xdg" / "systemd" / "user"
    assert unit.name == f"{answer['name']}.service"
    assert answer["name"].startswith("chorus-")  # not the default home: its own name
    text = unit.read_text()
    assert f"ExecStart={sys.executable} -m chorus.daemon" in text
    assert f'Environment="CHORUS_HOME={chorus_home.resolve()}"' in text
    assert f'Environment="PATH={os.environ["PATH"]}"' in text  # the agent CLIs are found
    assert "Restart=on-failure" in text  # `chorus stop` stays stopped
    assert f"StandardError=append:{chorus_home.resolve()}/run/daemon.log" in text
    assert "WantedBy=default.target" in text
    assert (chorus_home / "run").is_dir()  # systemd opens daemon.log before the daemon runs
    status = chorus(tmp_path, "status", "--kind", "systemd", "--json")
    assert json.loads(status.stdout)["installed"] is True
    gone = chorus(tmp_path, "uninstall", "--kind", "systemd", "--json")
    assert gone.returncode == 0
    assert json.loads(gone.stdout)["removed"] is True
    assert not unit.exists()


def test_without_systemctl_the_file_is_written_and_the_message_says_what_to_run(
    tmp_path: Path, chorus_home: Path
) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    done = chorus(tmp_path, "install", "--kind", "systemd", path=str(empty))
    assert done.returncode == 1
    assert "systemctl is not installed here" in done.stderr
    assert "systemctl --user enable --now chorus-" in done.stderr
    assert (tmp_path / "xdg" / "systemd" / "user").iterdir()
    status = chorus(tmp_path, "status", "--kind", "systemd", path=str(empty))
    assert "unknown: systemctl is not installed here" in status.stdout


@pytest.mark.skipif(shutil.which("systemctl") is None, reason="needs systemctl")
def test_systemctl_without_a_user_manager_is_reported_not_hidden(
    tmp_path: Path, chorus_home: Path
) -> None:
    probe = subprocess.run(["systemctl", "--user", "is-system-running"], capture_output=True)
    if probe.returncode == 0:
        pytest.skip("a user manager runs here: enabling would really start a daemon")
    done = chorus(tmp_path, "install", "--kind", "systemd", "--json")
    assert done.returncode == 1
    answer = json.loads(done.stdout)
    assert answer["enabled"] is False
    assert "daemon-reload" in answer["error"]


def test_launchd_agent_plist(tmp_path: Path, chorus_home: Path) -> None:
    done = chorus(tmp_path, "install", "--kind", "launchd", "--no-start", "--json")
    assert done.returncode == 0, done.stderr
    path = Path(json.loads(done.stdout)["path"])
    assert path.parent == tmp_path / "me" / "Library" / "LaunchAgents"
    plist = plistlib.loads(path.read_bytes())
    assert plist["ProgramArguments"] == [sys.executable, "-m", "chorus.daemon"]
    assert plist["EnvironmentVariables"]["CHORUS_HOME"] == str(chorus_home.resolve())
    assert plist["RunAtLoad"] is True
    assert plist["KeepAlive"] == {"SuccessfulExit": False}


def test_an_unknown_kind_is_bad_input(tmp_path: Path) -> None:
    done = chorus(tmp_path, "install", "--kind", "upstart")
    assert done.returncode == 2
    assert "unknown service kind 'upstart'" in done.stderr
    assert not (tmp_path / "xdg").exists()
