"""Plain git through subprocess: one runner, and small queries built on it.

Every call names its folder with ``-C`` and runs with git's own environment
variables removed (``GIT_DIR`` and friends, set inside hooks, would point git at
another repository) and ``LC_ALL=C`` so messages can be matched.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from chorus.worktrees._errors import GitError

_SCRUBBED = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR", "GIT_PREFIX")
#: The identity of Chorus's own commits when the repository has none configured.
FALLBACK_IDENTITY = ("-c", "user.name=Chorus", "-c", "user.email=chorus@localhost")


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _SCRUBBED}
    env.update(LC_ALL="C", GIT_TERMINAL_PROMPT="0")
    return env


def run(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """``git -C cwd args``; raises :class:`GitError` on a non-zero exit when ``check``."""
    argv = ["git", "-C", str(cwd), *args]
    done = subprocess.run(argv, capture_output=True, text=True, env=_env(), timeout=300)
    if check and done.returncode != 0:
        raise GitError(list(args), done.returncode, done.stderr)
    return done


def out(cwd: Path, *args: str) -> str:
    """The stripped stdout of a git command that must succeed."""
    return run(cwd, *args).stdout.strip()


def toplevel(path: Path) -> Path | None:
    """The top level git resolves for ``path`` (None outside a repository)."""
    done = run(path, "rev-parse", "--show-toplevel", check=False)
    return Path(done.stdout.strip()).resolve() if done.returncode == 0 else None


def git_dir(path: Path) -> Path:
    return Path(out(path, "rev-parse", "--path-format=absolute", "--git-dir"))


def main_checkout(path: Path) -> Path:
    """The main checkout of the repository ``path`` is in (also from a linked worktree)."""
    common = Path(out(path, "rev-parse", "--path-format=absolute", "--git-common-dir"))
    return common.parent.resolve()


def current_branch(path: Path) -> str | None:
    """The branch checked out at ``path``; None on a detached HEAD."""
    done = run(path, "symbolic-ref", "--short", "-q", "HEAD", check=False)
    return done.stdout.strip() or None


def commit_of(path: Path, ref: str) -> str | None:
    """The commit ``ref`` names, or None."""
    done = run(path, "rev-parse", "--verify", "-q", f"{ref}^{{commit}}", check=False)
    return done.stdout.strip() or None


def branch_exists(path: Path, name: str) -> bool:
    return commit_of(path, f"refs/heads/{name}") is not None


def valid_branch_name(path: Path, name: str) -> bool:
    return run(path, "check-ref-format", "--branch", name, check=False).returncode == 0


def changes(path: Path, skip: Sequence[str] = ()) -> list[str]:
    """``git status --porcelain`` lines: uncommitted and untracked (not ignored)
    files, leaving out the paths in ``skip``."""
    args = ["status", "--porcelain", "--untracked-files=all", *outside(skip)]
    text = run(path, *args).stdout
    return [line for line in text.split("\n") if line]


def outside(skip: Sequence[str]) -> list[str]:
    """Pathspecs for "everything but ``skip``" (each taken literally)."""
    return ["--", ".", *(f":(exclude,literal){p}" for p in skip)] if skip else []


def commits_between(path: Path, since: str, until: str) -> list[str]:
    """One line (short hash and subject) per commit in ``until`` and not in ``since``."""
    text = out(path, "log", "--format=%h %s", f"{since}..{until}")
    return [line for line in text.split("\n") if line]


def has_identity(path: Path) -> bool:
    return run(path, "config", "user.email", check=False).returncode == 0


@dataclass(frozen=True, slots=True)
class Listed:
    """One entry of ``git worktree list --porcelain``."""

    path: Path
    head: str
    branch: str | None
    locked: bool
    prunable: bool


def worktrees(path: Path) -> list[Listed]:
    """Every worktree git has registered for the repository (the main one first)."""
    blocks = out(path, "worktree", "list", "--porcelain").split("\n\n")
    return [_listed(block) for block in blocks if block.strip()]


def _listed(block: str) -> Listed:
    fields: dict[str, str] = {}
    for line in block.split("\n"):
        key, _, value = line.partition(" ")
        fields[key] = value
    branch = fields.get("branch", "").removeprefix("refs/heads/") or None
    return Listed(
        path=Path(fields["worktree"]),
        head=fields.get("HEAD", ""),
        branch=branch,
        locked="locked" in fields,
        prunable="prunable" in fields,
    )
