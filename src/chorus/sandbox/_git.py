"""What a body working in a git worktree may write of the main repository: what a
commit there needs (objects, refs, logs and the worktree's own folder), never the
repository's ``config``, ``hooks/`` or ``info/``, where a body could plant
``core.hooksPath``, ``core.fsmonitor``, a filter or a hook that the person's own
``git`` would run later.

The worktree's ``.git`` file is in the body's folder, so the body could rewrite it:
it is believed only when the main repository's record of that worktree points back
at it (``.git/worktrees/<name>/gitdir``, out of the body's reach). A ``.git`` file
of any other kind (a submodule's) adds nothing writable.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

#: In the main repository's git folder: what a commit in one of its worktrees writes.
COMMIT = ("objects", "refs", "logs")
#: In the worktree's folder there: where git finds the repository, and a config of
#: the worktree's own; read-only, so that no later git run is sent elsewhere.
POINTERS = ("commondir", "gitdir", "config.worktree")


@dataclass(frozen=True, slots=True)
class GitPaths:
    """The main repository's parts a worktree's body may write, those it may only
    read inside those, and its git folder (read-only, kept visible)."""

    writable: tuple[Path, ...] = ()
    read_only: tuple[Path, ...] = ()
    common: tuple[Path, ...] = ()


def git_paths(cwd: Path) -> GitPaths:
    """For a git worktree in ``cwd``: what a commit there writes in the main
    repository (nothing for any other folder)."""
    gitdir = worktree_gitdir(cwd)
    if gitdir is None:
        return GitPaths()
    common = gitdir.parent.parent
    writable = _existing([*(common / name for name in COMMIT), gitdir])
    _hold_worktree_config(gitdir)
    return GitPaths(writable, _existing(gitdir / name for name in POINTERS), (common,))


def _hold_worktree_config(gitdir: Path) -> None:
    """Create the worktree's own config empty when it has none, so that it is bound
    read-only too: written in the writable folder by a body, it would give a later
    git run there (``extensions.worktreeConfig``) a planted fsmonitor or hooksPath."""
    with contextlib.suppress(OSError):
        (gitdir / "config.worktree").touch(mode=0o644, exist_ok=True)


def worktree_gitdir(cwd: Path) -> Path | None:
    """The main repository's folder for the worktree in ``cwd``
    (``.git/worktrees/<name>``), if its record there points back at ``cwd``."""
    dotgit = cwd / ".git"
    gitdir = _pointer(dotgit, cwd)
    if gitdir is None or gitdir.parent.name != "worktrees":
        return None
    back = _pointer(gitdir / "gitdir", gitdir, prefix="")
    return gitdir if back is not None and back == dotgit.resolve() else None


def _pointer(file: Path, base: Path, prefix: str = "gitdir:") -> Path | None:
    """The path a git pointer file names (relative to ``base``), resolved."""
    try:
        text = file.read_text(encoding="utf-8") if file.is_file() else ""
    except (OSError, UnicodeDecodeError):
        return None
    rest = text[len(prefix) :].strip() if text.startswith(prefix) else ""
    return (base / rest).resolve() if rest else None


def _existing(paths: Iterable[Path]) -> tuple[Path, ...]:
    return tuple(p.resolve() for p in paths if p.exists())
