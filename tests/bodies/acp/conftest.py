"""Fixtures shared by the ACP body tests: the fake agent configured by name."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

FAKE_AGENT = Path(__file__).with_name("fake_acp_agent.py")


@pytest.fixture
def fake_config(chorus_home: Path) -> Path:
    """``[agents.fake]`` in config.toml: the only thing that makes the agent known."""
    chorus_home.mkdir(parents=True, exist_ok=True)
    config = chorus_home / "config.toml"
    config.write_text(
        "[agents.fake]\n"
        'protocol = "acp"\n'
        f"command = {json.dumps(sys.executable)}\n"
        f"args = [{json.dumps(str(FAKE_AGENT))}]\n"
        'env = { FAKE_FLAVOUR = "plain" }\n'
    )
    return config


@pytest.fixture
def work(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    path.mkdir()
    return path
