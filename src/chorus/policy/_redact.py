"""The redaction hook the policy layer writes through.

The store owns the one redactor (``chorus.store.Redactor``: registered secret
values, user patterns, built-in key formats). The policy layer only needs the
three methods in :class:`RedactorLike`; :func:`default_redactor` builds the
store's from the config.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
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


def register_env(
    redactor: RedactorLike, given: Mapping[str, str], inherited: Mapping[str, str]
) -> int:
    """Register every environment value Chorus gives a body (``[agents.*.env]``, vault
    secrets, native settings): none of them may reach the log in the clear.

    Skipped: values too short to redact, values the body would inherit anyway
    (``inherited`` holds the same value under that name) and existing absolute
    paths (a location, not a credential; redacting it would garble every stored
    path under it). Returns how many were registered.
    """
    return sum(
        add_secret_safely(redactor, value)
        for name, value in given.items()
        if inherited.get(name) != value and not _existing_path(value)
    )


def _existing_path(value: str) -> bool:
    return os.path.isabs(value) and "\n" not in value and os.path.exists(value)
