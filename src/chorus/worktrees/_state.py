"""The worktree lifecycle as one transition table.

* ``ready``: exists, no job is running in it;
* ``locked``: a job runs in it (``git worktree lock`` holds it too);
* ``merged``: its branch was merged into the branch it came from;
* ``missing``: its folder is gone (found by the guard or at daemon start); the
  branch and its commits are kept;
* ``removed``: ``rm`` or ``prune`` removed the folder (and the branch, if merged).
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum

from chorus.worktrees._errors import WorktreeError


class WorktreeState(StrEnum):
    READY = "ready"
    LOCKED = "locked"
    MERGED = "merged"
    MISSING = "missing"
    REMOVED = "removed"


_S = WorktreeState
TRANSITIONS: Mapping[WorktreeState, frozenset[WorktreeState]] = {
    _S.READY: frozenset({_S.LOCKED, _S.MERGED, _S.REMOVED, _S.MISSING}),
    _S.LOCKED: frozenset({_S.READY, _S.MISSING}),
    # A follow-up job of the session may run in a merged worktree again.
    _S.MERGED: frozenset({_S.LOCKED, _S.READY, _S.REMOVED, _S.MISSING}),
    _S.MISSING: frozenset({_S.REMOVED}),
    _S.REMOVED: frozenset(),
}


def check_transition(job_id: str, current: str, wanted: WorktreeState) -> WorktreeState:
    """Return ``wanted`` if ``current -> wanted`` is allowed, else raise."""
    if wanted not in TRANSITIONS[WorktreeState(current)]:
        raise WorktreeError(f"worktree of job {job_id} is {current}; it cannot become {wanted}")
    return wanted
