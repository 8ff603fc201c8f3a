"""The redaction hook the policy layer writes through.

The store owns the real redactor (``chorus.store.Redactor``: registered secret
values, user patterns, built-in key formats). The policy layer only needs the
three methods in :class:`RedactorLike`, so it accepts any object that has them;
:func:`default_redactor` returns the store's when that package exports one, and
otherwise :class:`ValueRedactor`, which replaces registered values only.
"""

from __future__ import annotations

import importlib
import json
import re
import threading
from typing import Any, Protocol, cast

#: Secret values shorter than this are not registered (they would shred ordinary text).
MIN_SECRET_CHARS = 6
MARKER = "[REDACTED:secret]"


class RedactorLike(Protocol):
    """What the audit log, flags and secret store need from a redactor."""

    def add_secret(self, value: str) -> None: ...

    def redact_text(self, text: str) -> str: ...

    def redact_json(self, value: Any) -> Any: ...


class ValueRedactor:
    """Replaces registered secret values (and their JSON-escaped forms). Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: set[str] = set()
        self._pattern: re.Pattern[str] | None = None

    def add_secret(self, value: str) -> None:
        """Redact ``value`` from now on. Values under :data:`MIN_SECRET_CHARS` are ignored."""
        if len(value) < MIN_SECRET_CHARS:
            return
        with self._lock:
            self._values |= {value, json.dumps(value)[1:-1]}
            ordered = sorted(self._values, key=len, reverse=True)
            self._pattern = re.compile("|".join(re.escape(v) for v in ordered))

    def redact_text(self, text: str) -> str:
        pattern = self._pattern
        return text if pattern is None else pattern.sub(MARKER, text)

    def redact_json(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.redact_text(value)
        if isinstance(value, dict):
            return {self.redact_json(k): self.redact_json(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.redact_json(v) for v in value]
        return value


def default_redactor() -> RedactorLike:
    """The store's redactor (with config patterns) when available, else :class:`ValueRedactor`."""
    try:
        store = importlib.import_module("chorus.store")
    except ImportError:  # pragma: no cover - the store is part of the same package
        return ValueRedactor()
    factory = getattr(store, "Redactor", None)
    if factory is None:
        return ValueRedactor()
    from_config = getattr(factory, "from_config", None)
    return cast(RedactorLike, from_config() if callable(from_config) else factory())


def add_secret_safely(redactor: RedactorLike, value: str) -> bool:
    """Register ``value``; False when it is too short for any redactor to accept."""
    if len(value) < MIN_SECRET_CHARS:
        return False
    redactor.add_secret(value)
    return True
