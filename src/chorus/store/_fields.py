"""Plain-text record fields, redacted before they are stored.

JSON fields (``options``, ``result``, ``error``, ``info``, ``detail`` ...) go
through :meth:`Redactor.redact_json` where each backend serializes them; the
helpers here cover the text columns around them: a job's body, a worktree's
repository, folder and branches, a routine's name, a team's and its members'
names. Both backends call them on write, and on the arguments of a lookup by
such a column (a routine's name, a worktree's repository, a team and member), so
a value that carried a secret is stored, and found again, in its redacted form
only.
"""

from __future__ import annotations

import dataclasses

from chorus.store._interface import Firing, WorktreeRecord
from chorus.store._mailbox import NewMessage
from chorus.store._redact import Redactor


def clean_opt(redactor: Redactor, value: str | None) -> str | None:
    """``value`` redacted, or None."""
    return None if value is None else redactor.redact_text(value)


def clean_worktree(redactor: Redactor, record: WorktreeRecord) -> WorktreeRecord:
    """The record with its text columns (not ``job_id``, ``base_commit``, ``state``) redacted."""
    return dataclasses.replace(
        record,
        repo=redactor.redact_text(record.repo),
        path=redactor.redact_text(record.path),
        branch=redactor.redact_text(record.branch),
        base=redactor.redact_text(record.base),
        into=redactor.redact_text(record.into),
    )


def clean_firing(redactor: Redactor, firing: Firing) -> Firing:
    """The firing with its routine name redacted (its ``detail`` is JSON, redacted apart)."""
    return dataclasses.replace(firing, routine=redactor.redact_text(firing.routine))


def clean_message(redactor: Redactor, message: NewMessage) -> NewMessage:
    """The message with its team, sender, recipient and correlation id redacted (its
    body is JSON, redacted apart)."""
    return dataclasses.replace(
        message,
        team=redactor.redact_text(message.team),
        sender=redactor.redact_text(message.sender),
        recipient=redactor.redact_text(message.recipient),
        correlation_id=clean_opt(redactor, message.correlation_id),
    )


def clean_names(redactor: Redactor, names: dict[str, str | None]) -> dict[str, str | None]:
    """Lookup parameters (``team``, ``recipient`` ...) redacted like the stored names."""
    return {key: clean_opt(redactor, value) for key, value in names.items()}
