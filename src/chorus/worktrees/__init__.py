"""Every job in its own git worktree, on request, and never a lost commit.

A job that asks (``--worktree``, or ``[daemon] worktree = "auto"``) runs in
``<root>/<repo>/<job>`` (root: ``[worktree] root`` or ``CHORUS_HOME/worktrees``)
on branch ``chorus/<job-short>-<slug>`` made from HEAD's branch or ``--base``.
The worktree is locked while a job runs in it, guarded before every start (the
folder exists and git resolves it to itself), and whatever the body left
uncommitted is committed at the job's end. ``merge`` goes back into the branch it
came from and aborts on conflict; ``rm`` removes only clean, merged worktrees
unless forced; nothing is ever deleted behind the user's back.

Pure git through subprocess, every call through one runner that executes nothing
the repository names (:mod:`._git`: hooks, filters, fsmonitor, external diff,
pagers ...; :func:`run_git`, :func:`git_diff` for the rest of Chorus); records live in the store
(:class:`chorus.store.WorktreeRecord`), events in the log (:class:`chorus.events.Worktree`).
"""

from chorus.worktrees._copy import Copies, copy_untracked
from chorus.worktrees._create import Created, Spec, create, plan, undo
from chorus.worktrees._errors import (
    BranchInUseError,
    DetachedHeadError,
    GitError,
    MergeConflictError,
    NotARepositoryError,
    SetupFailedError,
    UnknownRefError,
    UnmergedWorkError,
    WorktreeError,
    WorktreeGuardError,
)
from chorus.worktrees._git import diff_of as git_diff
from chorus.worktrees._git import run as run_git
from chorus.worktrees._jobs import (
    PreparedJob,
    WorktreeAsk,
    finish_job_worktree,
    guard_job_worktree,
    job_worktree,
    prepare_job_worktree,
    start_job_worktree,
)
from chorus.worktrees._manage import (
    describe,
    diff,
    list_all,
    merge,
    prune,
    remove,
    report_orphans,
    resolve,
)
from chorus.worktrees._naming import branch_for, first_line, path_for, slug, worktrees_root
from chorus.worktrees._ops import Status, autocommit, guard, status
from chorus.worktrees._state import TRANSITIONS, WorktreeState

__all__ = [
    "TRANSITIONS",
    "BranchInUseError",
    "Copies",
    "Created",
    "DetachedHeadError",
    "GitError",
    "MergeConflictError",
    "NotARepositoryError",
    "PreparedJob",
    "SetupFailedError",
    "Spec",
    "Status",
    "UnknownRefError",
    "UnmergedWorkError",
    "WorktreeAsk",
    "WorktreeError",
    "WorktreeGuardError",
    "WorktreeState",
    "autocommit",
    "branch_for",
    "copy_untracked",
    "create",
    "describe",
    "diff",
    "finish_job_worktree",
    "first_line",
    "git_diff",
    "guard",
    "guard_job_worktree",
    "job_worktree",
    "list_all",
    "merge",
    "path_for",
    "plan",
    "prepare_job_worktree",
    "prune",
    "remove",
    "report_orphans",
    "resolve",
    "run_git",
    "slug",
    "start_job_worktree",
    "status",
    "undo",
    "worktrees_root",
]
