"""``chorus.client``: every public name resolves, the socket client stays light, and
the daemon's public names still lead to the same objects."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

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


def test_an_empty_prompt_is_refused_before_anything_starts(tmp_path: Path) -> None:
    """With no daemon running, ``chorus ask ""`` is refused by the client itself:
    exit 2, the reason, and no daemon started (no CHORUS_HOME made)."""
    assert chorus.client.prompt_problem(" \n", 100) == "the prompt is empty"
    home = tmp_path / "home"
    env = {**os.environ, "CHORUS_HOME": str(home)}
    out = subprocess.run(
        [sys.executable, "-m", "chorus", "ask", " ", "--body", "claude"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert (out.returncode, out.stderr.strip()) == (2, "error: the prompt is empty")
    assert not home.exists()
