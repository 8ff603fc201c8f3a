"""A job's framework options, read and checked (by the client before it sends a job,
and by the daemon when it queues one)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from chorus._errors import UserError
from chorus.frameworks._runner import FRAMEWORKS


def framework_options(
    framework: str | None,
    planners: Sequence[str] | None,
    reviewer: str | None,
    rounds: int | None,
    known: Sequence[str],
) -> dict[str, Any]:
    """The job options for a framework request; bad names raise :class:`UserError`."""
    if framework in (None, "direct"):
        return {}
    if framework not in FRAMEWORKS:
        raise UserError(f"unknown framework {framework!r}; use one of {', '.join(FRAMEWORKS)}")
    for body in [*(planners or ()), *([reviewer] if reviewer else [])]:
        if body not in known:
            raise UserError(f"unknown body {body!r} for the framework; known: {', '.join(known)}")
    if rounds is not None and not 1 <= rounds <= 5:
        raise UserError("rounds must be between 1 and 5")
    chosen = {"framework": framework, "planners": list(planners or ()), "reviewer": reviewer}
    return {**chosen, "rounds": rounds or 1}
