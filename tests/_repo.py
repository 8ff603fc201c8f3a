"""Plain ``git`` for tests: a real repository with one commit on ``main`` (the set-up
of every worktree and git-escape test), and git's output."""

from __future__ import annotations

import subprocess
from pathlib import Path

__all__ = ["git", "make_repo"]


def git(cwd: Path, *args: str, check: bool = True) -> str:
    """Plain git in ``cwd`` (never Chorus's); its output, stripped. ``check``: fail the
    test when git fails."""
    done = subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, text=True)
    assert done.returncode == 0 or not check, done.stderr
    return done.stdout.strip()


def make_repo(path: Path) -> None:
    """``path`` becomes a repository on branch ``main`` with ``README`` committed."""
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.name", "Tester")
    git(path, "config", "user.email", "tester@example.com")
    (path / "README").write_text("hello\n")
    git(path, "add", "README")
    git(path, "commit", "-q", "-m", "first")
