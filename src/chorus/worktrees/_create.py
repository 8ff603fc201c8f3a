"""Creating a job's worktree: check everything first, then create, undo on failure.

:func:`plan` only reads: every bad input (not a repository, a detached HEAD, an
unknown base, a branch name in use, a bad name) is refused before anything is
made. :func:`create` then adds the worktree, copies the configured untracked
files and runs the setup command; if any step fails it removes what it made,
so nothing is left half-created.

A dirty main checkout is not an error: the worktree starts from the last commit
of the base (HEAD's branch when no ``--base`` is given), so the job does not
see uncommitted changes; :attr:`Spec.warnings` says so and the ``created``
event carries it.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from chorus.config import WorktreeConfig
from chorus.worktrees import _git as git
from chorus.worktrees._copy import Copies, copy_untracked
from chorus.worktrees._errors import (
    BranchInUseError,
    DetachedHeadError,
    NotARepositoryError,
    SetupFailedError,
    UnknownRefError,
    WorktreeError,
)
from chorus.worktrees._naming import branch_for, path_for

log = logging.getLogger("chorus.worktrees")


@dataclass(frozen=True, slots=True)
class Spec:
    """A checked plan for one job's worktree."""

    job_id: str
    main: Path
    source: Path
    path: Path
    branch: str
    base: str
    base_commit: str
    into: str
    #: The folder the job runs in: the same subfolder of the worktree as the request's.
    job_cwd: Path
    warnings: tuple[str, ...] = ()


def plan(
    cwd: Path,
    job_id: str,
    prompt: str,
    config: WorktreeConfig,
    *,
    branch: str | None = None,
    base: str | None = None,
) -> Spec:
    """Check the request against the repository; raise a :class:`WorktreeError`
    naming what to do, or return the :class:`Spec` (nothing is written)."""
    source = _source(cwd)
    main = git.main_checkout(source)
    base, into = _base_and_into(source, base)
    commit = git.commit_of(source, base)
    if commit is None:
        raise UnknownRefError(f"--base {base!r} names no commit in {main}")
    name = _free_branch(source, branch or branch_for(job_id, prompt))
    path = path_for(config, main, job_id)
    if path.exists():
        raise WorktreeError(f"{path} already exists; remove it or use another job")
    rel = cwd.resolve().relative_to(source)
    return Spec(
        job_id, main, source, path, name, base, commit, into, path / rel, _dirty_note(source, base)
    )


def _source(cwd: Path) -> Path:
    top = git.toplevel(cwd) if cwd.is_dir() else None
    if top is None:
        raise NotARepositoryError(
            f"{cwd} is not inside a git repository, so a job cannot get its own worktree "
            "there: run `git init` (and commit) first, or drop --worktree"
        )
    return top


def _base_and_into(source: Path, base: str | None) -> tuple[str, str]:
    """The ref to start from, and the branch a merge will go back into."""
    head = git.current_branch(source)
    if base is None and head is None:
        raise DetachedHeadError(
            f"HEAD in {source} is detached: there is no branch to start from and merge "
            "back into; check out a branch, or pass --base BRANCH"
        )
    start = base or head
    assert start is not None
    into = start if git.branch_exists(source, start) else head
    if into is None:
        raise DetachedHeadError(
            f"--base {start!r} is not a local branch and HEAD in {source} is detached, so "
            "there is no branch to merge back into; pass a branch as --base"
        )
    return start, into


def _free_branch(source: Path, name: str) -> str:
    if not git.valid_branch_name(source, name):
        raise WorktreeError(f"{name!r} is not a valid git branch name")
    if not git.branch_exists(source, name):
        return name
    holder = next((w.path for w in git.worktrees(source) if w.branch == name), None)
    where = f" and checked out at {holder}" if holder else ""
    raise BranchInUseError(
        f"branch {name!r} already exists{where}; pick another with --branch NAME "
        "(Chorus never reuses or resets an existing branch)"
    )


def _dirty_note(source: Path, base: str) -> tuple[str, ...]:
    changed = len(git.changes(source))
    if not changed or base != git.current_branch(source):
        return ()
    return (
        f"{source} has {changed} uncommitted change(s); the worktree starts from the last "
        f"commit of {base} without them (commit them first to include them)",
    )


@dataclass(frozen=True, slots=True)
class Created:
    """What :func:`create` did besides adding the worktree. ``copied`` files are
    copies of the main checkout's: never committed, not counted as changes, and
    removed with the worktree."""

    copied: list[str]
    notes: list[str]
    #: Files ``[worktree] copy`` matched but would not copy (``"<path>: <why>"``).
    refused: list[str] = field(default_factory=list)


def create(spec: Spec, config: WorktreeConfig) -> Created:
    """Add the worktree, copy untracked files, run the setup command. On any
    failure the worktree and its new branch are removed again, then it raises."""
    spec.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    add = ("worktree", "add", "-q", "--no-checkout", "-b", spec.branch, str(spec.path))
    git.run(spec.main, *add, spec.base_commit)
    notes: list[str] = []
    with _undo_on_error(spec):
        # Checked out from inside the new worktree: its config (an includeIf of its
        # branch or folder) is what git will see there, so that is what is listed.
        git.run(spec.path, "reset", "-q", "--hard", "--no-recurse-submodules")
        copies = copy_untracked(spec.source, spec.path, config.copy_files)
        notes += _copy_notes(spec.path, copies)
        if config.setup:
            notes.append(run_setup(spec.path, config.setup, config.setup_timeout_s))
    return Created(copies.copied, notes, copies.refused)


def _copy_notes(path: Path, copies: Copies) -> list[str]:
    """What the ``created`` event says about the copies; a refusal is logged too."""
    notes = ["copied " + ", ".join(copies.copied)] if copies.copied else []
    if copies.refused:
        refused = "; ".join(copies.refused)
        log.warning("worktree %s: refused to copy %s", path, refused)
        notes.append(f"refused to copy {refused}")
    return notes


@contextlib.contextmanager
def _undo_on_error(spec: Spec) -> Iterator[None]:
    try:
        yield
    except BaseException:
        undo(spec)
        raise


def undo(spec: Spec) -> None:
    """Remove a worktree :func:`create` just made (its branch has no commit of its own)."""
    git.run(spec.main, "worktree", "remove", "--force", "--force", str(spec.path), check=False)
    git.run(spec.main, "branch", "-D", spec.branch, check=False)
    shutil.rmtree(spec.path, ignore_errors=True)
    git.run(spec.main, "worktree", "prune", check=False)


def run_setup(path: Path, command: str, timeout: float) -> str:
    """Run the setup command in the worktree; raise :class:`SetupFailedError` on failure."""
    try:
        done = subprocess.run(
            command, shell=True, cwd=path, capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired as exc:
        raise SetupFailedError(f"setup command {command!r} timed out after {timeout:.0f}s") from exc
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip()[-400:]
        raise SetupFailedError(
            f"setup command {command!r} failed (exit {done.returncode}): {tail}; "
            "the worktree was removed again"
        )
    return f"setup {command!r} ok"
