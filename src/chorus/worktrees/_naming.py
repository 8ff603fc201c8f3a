"""One naming scheme for creating, finding and cleaning up job worktrees."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from chorus.config import WorktreeConfig, chorus_home

BRANCH_PREFIX = "chorus/"
_SLUG_CHARS = re.compile(r"[^a-z0-9]+")
_SLUG_MAX = 32


def slug(prompt: str) -> str:
    """A short branch-safe slug of the prompt's first line (``task`` when empty)."""
    first = prompt.strip().split("\n", 1)[0].lower()
    words = _SLUG_CHARS.sub("-", first).strip("-")
    return words[:_SLUG_MAX].rstrip("-") or "task"


def branch_for(job_id: str, prompt: str) -> str:
    """``chorus/<job-short>-<slug>``: the job id makes it unique (ids are never reused)."""
    return f"{BRANCH_PREFIX}{job_id[:8]}-{slug(prompt)}"


def repo_key(main: Path) -> str:
    """``<folder name>-<hash of its path>``: readable, and two repositories of one
    name in different places never share a folder."""
    digest = hashlib.sha256(str(main).encode()).hexdigest()[:8]
    return f"{main.name or 'repo'}-{digest}"


def worktrees_root(config: WorktreeConfig) -> Path:
    """``[worktree] root`` or ``CHORUS_HOME/worktrees``."""
    if config.root:
        return Path(config.root).expanduser().resolve()
    return (chorus_home() / "worktrees").resolve()


def path_for(config: WorktreeConfig, main: Path, job_id: str) -> Path:
    return worktrees_root(config) / repo_key(main) / job_id


def first_line(prompt: str) -> str:
    """The job's prompt, first line: the message of its automatic commit."""
    line = prompt.strip().split("\n", 1)[0].strip()
    return line[:200] or "chorus job"
