"""The pinned ``claude`` CLI, for the tests that drive it (skipped when not installed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from chorus import AgentNotFoundError
from chorus.agents import find_agent


@pytest.fixture
def claude() -> Path:
    try:
        return find_agent("claude")
    except AgentNotFoundError:
        pytest.skip("the pinned claude CLI is not installed (chorus agents install)")
