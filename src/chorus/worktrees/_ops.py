"""What Chorus does to an existing job worktree: guard, lock, commit, inspect,
merge, remove. Plain synchronous git; the async layer runs these in threads.

The guard runs before every operation inside the worktree folder: if the
folder is gone, an empty directory would let git walk up to the main checkout's
``.git`` and act there, so nothing runs unless git resolves the folder to itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from chorus.worktrees import _git as git
from chorus.worktrees._errors import (
    MergeConflictError,
    UnmergedWorkError,
    WorktreeError,
    WorktreeGuardError,
)


def guard(path: Path, branch: str = "") -> None:
    """Raise :class:`WorktreeGuardError` unless ``path`` is a live worktree of its own."""
    on = f" (its commits are safe on branch {branch})" if branch else ""
    if not path.is_dir():
        raise WorktreeGuardError(
            f"the worktree {path} is gone{on}; Chorus will not run there or anywhere else. "
            "`chorus worktree prune` clears it; start the job again to get a new one"
        )
    top = git.toplevel(path)
    if top != path.resolve() or git.git_dir(path).parent.name != "worktrees":
        raise WorktreeGuardError(
            f"git resolves {path} to {top or 'no repository'}, not to the worktree itself{on}; "
            "Chorus will not run there, it would act on another checkout"
        )


def lock(main: Path, path: Path, job_id: str) -> None:
    """``git worktree lock`` for the job (a lock left by a dead daemon is replaced)."""
    git.run(main, "worktree", "unlock", str(path), check=False)
    git.run(main, "worktree", "lock", "--reason", f"chorus job {job_id} is running", str(path))


def unlock(main: Path, path: Path) -> None:
    git.run(main, "worktree", "unlock", str(path), check=False)


def autocommit(
    path: Path, message: str, branch: str = "", skip: Sequence[str] = ()
) -> tuple[str, int] | None:
    """Commit everything uncommitted in the worktree (tracked and untracked, not
    ignored, not in ``skip``: the copied files) on its branch; return (short hash,
    files) or None when it was clean. Hooks are skipped: a failing pre-commit hook
    must not leave work behind."""
    guard(path, branch)
    changed = git.changes(path, skip)
    if not changed:
        return None
    git.run(path, "add", "-A", *git.outside(skip))
    git.run(path, "commit", "-q", "--no-verify", "-m", message, settings=git.identity(path))
    return git.out(path, "rev-parse", "--short", "HEAD"), len(changed)


@dataclass(frozen=True, slots=True)
class Status:
    """Where a worktree stands against the branch it came from."""

    exists: bool
    dirty: int
    ahead: int
    behind: int
    tip: str | None
    unmerged: list[str]


def status(
    main: Path,
    path: Path,
    branch: str,
    into: str,
    merged_tip: str | None,
    skip: Sequence[str] = (),
) -> Status:
    """Ahead/behind ``into``, uncommitted files but ``skip`` (when the folder is
    live), and the commits only the branch has (empty once merged, also by a squash)."""
    tip = git.commit_of(main, f"refs/heads/{branch}")
    exists = path.is_dir() and git.toplevel(path) == path.resolve()
    dirty = len(git.changes(path, skip)) if exists else 0
    if tip is None:
        return Status(exists, dirty, 0, 0, None, [])
    ahead = int(git.out(main, "rev-list", "--count", f"{into}..{branch}"))
    behind = int(git.out(main, "rev-list", "--count", f"{branch}..{into}"))
    squashed = merged_tip is not None and merged_tip == tip
    unmerged = [] if squashed else git.commits_between(main, into, branch)
    return Status(exists, dirty, ahead, behind, tip, unmerged)


def diff(main: Path, branch: str, into: str) -> str:
    """What the branch changed since it left ``into`` (``git diff into...branch``)."""
    return git.run(main, "diff", f"{into}...{branch}").stdout


def checkout_of(main: Path, branch: str) -> Path:
    """The worktree (main or linked) where ``branch`` is checked out."""
    for listed in git.worktrees(main):
        if listed.branch == branch and not listed.prunable:
            return listed.path
    raise WorktreeError(f"branch {branch!r} is not checked out anywhere; check it out in {main}")


def merge(main: Path, branch: str, into: str, *, squash: bool, message: str) -> str:
    """Merge ``branch`` into ``into`` where ``into`` is checked out; return its new
    short head. A conflict aborts the merge, leaves the target as it was and raises
    :class:`MergeConflictError`; a dirty target is refused before anything."""
    target = checkout_of(main, into)
    dirty = git.run(target, "status", "--porcelain", "--untracked-files=no").stdout.strip()
    if dirty:
        raise WorktreeError(f"{target} has uncommitted changes; commit or stash them, then merge")
    ident = git.identity(target)
    args = ["merge", "--squash", branch] if squash else ["merge", "--no-edit", branch]
    done = git.run(target, *args, check=False, settings=ident)
    if done.returncode != 0:
        _abort(target, squash, done.stderr or done.stdout, into)
    if squash and git.run(target, "diff", "--cached", "--quiet", check=False).returncode:
        git.run(target, "commit", "-q", "-m", message, settings=ident)
    return git.out(target, "rev-parse", "--short", "HEAD")


def _abort(target: Path, squash: bool, output: str, into: str) -> None:
    files = git.out(target, "diff", "--name-only", "--diff-filter=U").split("\n")
    files = [f for f in files if f]
    if not files:  # refused before it started (e.g. untracked files in the way)
        raise WorktreeError(f"git refused the merge into {into}: {output.strip()[-400:]}")
    # --squash leaves no MERGE_HEAD, so `merge --abort` cannot undo it; reset --merge can.
    git.run(target, *(["reset", "--merge"] if squash else ["merge", "--abort"]))
    drivers = git.merge_drivers(target)
    why = (
        f" (the repository configures {', '.join(drivers)}: Chorus never runs a merge "
        "driver, a merge by hand does)"
        if drivers
        else ""
    )
    raise MergeConflictError(
        f"merging into {into} conflicts in {', '.join(files)}{why}; the merge was aborted "
        f"and {target} is as it was. Resolve it by hand (git merge there) or rebase the branch",
        files,
    )


def remove(
    main: Path, path: Path, branch: str, st: Status, *, force: bool, copied: Sequence[str] = ()
) -> list[str]:
    """Remove the worktree and its branch; refused (:class:`UnmergedWorkError`)
    unless clean and merged, or ``force``. The ``copied`` files (copies of the main
    checkout's) go with it. Returns the commits that were discarded."""
    if not force and (st.unmerged or st.dirty):
        raise UnmergedWorkError(_refusal(branch, st), st.unmerged)
    for name in copied:
        (path / name).unlink(missing_ok=True)
    if path.exists():
        # --force: cleanliness was checked above, by Chorus's own status; git's own
        # check would run `git status` in the worktree, whose config (an includeIf
        # of its branch) the listing made in ``main`` does not see.
        git.run(main, "worktree", "remove", "--force", str(path))
    git.run(main, "worktree", "prune")
    if st.tip is not None:
        # -d is git's own "fully merged" check; a squash-merged branch needs -D.
        safe = not force and not st.unmerged and st.ahead == 0
        git.run(main, "branch", "-d" if safe else "-D", branch)
    return st.unmerged


def _refusal(branch: str, st: Status) -> str:
    parts = []
    if st.unmerged:
        listed = "\n".join(f"  {c}" for c in st.unmerged)
        parts.append(f"branch {branch} has {len(st.unmerged)} unmerged commit(s):\n{listed}")
    if st.dirty:
        parts.append(f"the worktree has {st.dirty} uncommitted change(s)")
    return "; ".join(parts) + "\nmerge it first (`chorus worktree merge`), or rm --force to discard"
