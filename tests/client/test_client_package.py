"""``chorus.client``: every public name resolves, the socket client stays light, and
the daemon's public names still lead to the same objects."""

from __future__ import annotations

import subprocess
import sys

import chorus.client
import chorus.daemon


def test_every_public_name_resolves() -> None:
    missing = [name for name in chorus.client.__all__ if not hasattr(chorus.client, name)]
    assert missing == []


def test_the_daemon_names_the_same_client_objects() -> None:
    for name in ("DaemonClient", "NotRunningError", "spawn_daemon", "prompt_problem"):
        assert getattr(chorus.daemon, name) is getattr(chorus.client, name)


def test_importing_the_client_loads_neither_pydantic_nor_the_daemon() -> None:
    code = (
        "import sys, chorus.client\n"
        "heavy = [m for m in ('pydantic', 'chorus.config', 'chorus.daemon') if m in sys.modules]\n"
        "print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_a_prompt_over_the_limit_is_named_with_its_size() -> None:
    assert chorus.client.prompt_problem("abc", 3) is None
    problem = chorus.client.prompt_problem("abcd", 3)
    assert problem is not None
    assert "4 bytes" in problem
    assert "max_prompt_bytes" in problem
