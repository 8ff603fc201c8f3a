"""The redaction hook the policy layer writes through.

The store owns the one redactor (``chorus.store.Redactor``: registered secret
values, user patterns, built-in key formats). The policy layer only needs the
three methods in :class:`RedactorLike`; :func:`default_redactor` builds the
store's from the config.
"""

from __future__ import annotations

from typing import Any, Protocol

#: Secret values shorter than this are not registered (they would shred ordinary text).
MIN_SECRET_CHARS = 6


class RedactorLike(Protocol):
    """What the audit log, flags and secret store need from a redactor."""

    def add_secret(self, value: str) -> None: ...

    def redact_text(self, text: str) -> str: ...

    def redact_json(self, value: Any) -> Any: ...


def default_redactor() -> RedactorLike:
    """The store's redactor, with the config's patterns: the one ``redact_text`` of
    Chorus (secret values, user patterns, built-in key formats)."""
    from chorus.store import Redactor

    return Redactor.from_config()


def add_secret_safely(redactor: RedactorLike, value: str) -> bool:
    """Register ``value``; False when it is too short for any redactor to accept."""
    if len(value) < MIN_SECRET_CHARS:
        return False
    redactor.add_secret(value)
    return True
