"""Policy tests never touch the developer's real OS keyring."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def file_key_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Force the key-file backend; the keyring test opts back in explicitly."""
    monkeypatch.setenv("CHORUS_KEYRING", "file")
