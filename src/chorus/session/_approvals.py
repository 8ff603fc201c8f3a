"""The ``Flag`` event of a permission ask that waits for a person (an approval):
what it asks, its default and deadline, and the command that answers it."""

from __future__ import annotations

from chorus.events import Flag
from chorus.policy import PendingFlag


def approval_event(flag: PendingFlag, job_id: str | None) -> Flag:
    job = (job_id or "-")[:12]
    return Flag(
        name="approval",
        text=flag.summary,
        flag_id=flag.id,
        options=["allow", "deny"],
        default=flag.default,
        deadline_at=flag.expires,
        answer_hint=f"chorus approve {job} {flag.id} | chorus reject {job} {flag.id} 'reason'",
    )
