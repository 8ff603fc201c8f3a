"""Errors of :mod:`chorus.worktrees`, placed in Chorus's error tree::

ChorusError
├── UserError
│   └── WorktreeError              a worktree request or operation was refused
│       ├── NotARepositoryError    the folder is not inside a git repository
│       ├── DetachedHeadError      HEAD names no branch and no --base was given
│       ├── UnknownRefError        --base names nothing git knows
│       ├── BranchInUseError       the branch exists (maybe checked out elsewhere)
│       ├── SetupFailedError       the setup command failed (the worktree was undone)
│       ├── WorktreeGuardError     the worktree is gone or git resolves elsewhere
│       ├── MergeConflictError     a merge stopped on conflicts (and was aborted)
│       └── UnmergedWorkError      rm would lose commits or changes
└── GitError                       git itself failed unexpectedly
"""

from __future__ import annotations

from chorus._errors import ChorusError, UserError


class WorktreeError(UserError):
    """A worktree request or operation was refused; nothing was changed."""


class NotARepositoryError(WorktreeError):
    """The job's folder is not inside a git repository."""


class DetachedHeadError(WorktreeError):
    """HEAD is detached: there is no branch to start from and merge back into."""


class UnknownRefError(WorktreeError):
    """``--base`` names no commit."""


class BranchInUseError(WorktreeError):
    """The branch name is taken (and maybe checked out in another worktree)."""


class SetupFailedError(WorktreeError):
    """The configured setup command failed; the new worktree was removed again."""


class WorktreeGuardError(WorktreeError):
    """The worktree folder is missing, or git resolves its top level elsewhere: the
    job must not run (it would fall through to the main checkout)."""


class MergeConflictError(WorktreeError):
    """The merge hit conflicts; it was aborted and the target left as it was."""

    def __init__(self, message: str, files: list[str]) -> None:
        super().__init__(message)
        self.files = files


class UnmergedWorkError(WorktreeError):
    """Removing the worktree would lose commits or uncommitted changes."""

    def __init__(self, message: str, commits: list[str]) -> None:
        super().__init__(message)
        self.commits = commits


class GitError(ChorusError):
    """A git command failed where Chorus did not expect it to."""

    def __init__(self, argv: list[str], code: int, stderr: str) -> None:
        tail = stderr.strip()[-500:]
        super().__init__(f"git {' '.join(argv)} failed (exit {code}): {tail}")
        self.argv = argv
        self.code = code
        self.stderr = stderr
