"""The README's demo command runs a real CLI offline and succeeds."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.e2e
def test_demo_runs_claude_offline_and_leaves_home_alone(chorus_home: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "chorus", "demo"],
        capture_output=True,
        text=True,
        timeout=120,
        env=os.environ.copy(),
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "tool shell (Bash)" in result.stdout
    assert "job succeeded" in result.stdout
    assert "hello.txt on disk: 'hello from chorus'" in result.stdout
    assert not chorus_home.exists()  # the demo used a throwaway home


def test_demo_refuses_unknown_body() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "chorus", "demo", "--body", "nope"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "claude, codex or gemini" in result.stderr
