"""The features' MCP tools are registered by the daemon at start-up: the server's
registry names no package above it."""

from __future__ import annotations

import subprocess
import sys

from chorus.daemon import install_tools
from chorus.mcpserver import registered_tools

FEATURE_TOOLS = {"flag", "schedule_routine", "team_inbox", "team_send", "team_status"}


def test_the_registry_alone_serves_only_chorus_own_tools() -> None:
    code = (
        "from chorus.mcpserver import registered_tools\n"
        "print(' '.join(s.name for s in registered_tools()))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["memory_search", "memory_write", "notify_user"]


def test_install_adds_the_features_tools_once() -> None:
    install_tools()
    install_tools()  # again: no error, no duplicate
    names = [spec.name for spec in registered_tools()]
    assert set(names) >= FEATURE_TOOLS
    assert len(names) == len(set(names))
