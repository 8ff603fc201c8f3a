"""nothing under CHORUS_HOME is readable by group or others once the real
daemon has started on a fresh home (umask 077, the home tightened at start), and
bodies still write project files with the user's own umask."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from chorus.config import body_umask, private_umask
from chorus.daemon import stop_daemon

pytestmark = pytest.mark.e2e


def chorus(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "chorus", *args],
        capture_output=True,
        text=True,
        timeout=90,
        cwd=cwd,
        env=os.environ.copy(),
    )


def loose(home: Path) -> list[str]:
    """Everything under ``home`` (the home too) that group or others may use."""
    found = []
    for path in [home, *home.rglob("*")]:
        mode = stat.S_IMODE(path.lstat().st_mode)
        if not path.is_symlink() and mode & 0o077:
            found.append(f"{path.relative_to(home.parent)} {mode:o}")
    return found


def test_every_file_under_a_fresh_home_is_private_after_chorus_start(
    chorus_home: Path, tmp_path: Path
) -> None:
    old = os.umask(0o022)  # a usual user umask: files 644, folders 755
    try:
        chorus_home.mkdir(mode=0o755)
        (chorus_home / "config.toml").write_text(
            "[daemon]\nnotifications = false\n[gateway]\nport = 0\n"
        )
        assert loose(chorus_home)  # the test starts from a home others can read
        work = tmp_path / "work"
        work.mkdir()
        try:
            done = chorus("start", cwd=work)
            assert done.returncode == 0, done.stderr[-2000:]
            assert chorus("status", "--json", cwd=work).returncode == 0
            names = {p.name for p in chorus_home.rglob("*")}
            assert {"chorus.db", "policy.toml"} <= names
            assert loose(chorus_home) == []
        finally:
            stop_daemon()
    finally:
        os.umask(old)
    assert loose(chorus_home) == []


def test_private_umask_keeps_the_users_for_bodies(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("chorus.config._home._USER_UMASK", [])
    assert body_umask() == -1  # never made private: bodies inherit as they are
    old = os.umask(0o022)
    try:
        private_umask()
        private_umask()  # a second call does not forget the user's umask
        assert os.umask(0o077) == 0o077  # the process is private now
        assert body_umask() == 0o022
    finally:
        os.umask(old)
