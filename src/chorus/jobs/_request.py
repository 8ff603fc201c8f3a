"""What a client, a routine or the dashboard asks the daemon to run."""

from __future__ import annotations

from dataclasses import dataclass

from chorus.store import Firing


@dataclass(frozen=True, slots=True)
class JobRequest:
    """What a client asks for. ``body=None`` lets the router choose."""

    prompt: str
    body: str | None = None
    model: str | None = None
    cwd: str | None = None
    session_id: str | None = None
    #: None: the policy's own default mode.
    permission_mode: str | None = None
    #: A thinking framework (``chorus.frameworks``): None or "direct" is one body.
    framework: str | None = None
    planners: list[str] | None = None
    reviewer: str | None = None
    rounds: int | None = None
    #: A routine's firing: recorded with the job in one transaction, so
    #: it queues at most one job (FiringExistsError the second time).
    firing: Firing | None = None
    #: Run in a git worktree of its own (None: ``[daemon] worktree``); see chorus.worktrees.
    worktree: bool | None = None
    branch: str | None = None
    base: str | None = None
    #: False: on a quota error the job fails instead of moving to another body.
    failover: bool | None = None
