"""Shared fixtures: every test runs with its own temporary CHORUS_HOME."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def chorus_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "chorus-home"
    monkeypatch.setenv("CHORUS_HOME", str(home))
    return home
