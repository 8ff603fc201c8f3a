"""Fixtures: a real git repository with one commit on ``main``, git isolated from
the machine's own configuration."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

Git = Callable[..., str]


def run_git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.fixture(autouse=True)
def isolated_git(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(tmp_path / "gitconfig"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """``tmp_path/repo``: branch main, README committed, ``.env*`` ignored."""
    path = tmp_path / "repo"
    path.mkdir()
    run_git(path, "init", "-q", "-b", "main")
    run_git(path, "config", "user.name", "Tester")
    run_git(path, "config", "user.email", "tester@example.com")
    (path / "README").write_text("hello\n")
    (path / ".gitignore").write_text(".env*\n")
    run_git(path, "add", "-A")
    run_git(path, "commit", "-q", "-m", "first")
    return path


@pytest.fixture
def git() -> Git:
    return run_git
