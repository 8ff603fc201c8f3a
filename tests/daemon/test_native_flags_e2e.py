"""One-shot bodies have no permission callback: the daemon starts them with the native
flags the policy allows. Real Gemini headless: in the default mode its shell tool is
not even declared; only bypassPermissions with native.allow_dangerous lets it run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from chorus.daemon import stop_daemon
from chorus.events import ToolResult, parse_event
from chorus.policy import DEFAULT_POLICY_TOML
from chorus.testing import ModelServer, offline_env, shell, text

pytestmark = pytest.mark.e2e


def _run(home: Path, work: Path, *mode: str) -> list[object]:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "chorus",
            "ask",
            "remove sub",
            "--body",
            "gemini-headless",
            "--json",
            *mode,
        ],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=work,
        env=os.environ.copy(),
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return [parse_event(line) for line in done.stdout.splitlines()]


@pytest.mark.parametrize("dangerous", [False, True])
def test_policy_flags_govern_gemini_headless(
    dangerous: bool, chorus_home: Path, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    (work / "sub").mkdir(parents=True)
    chorus_home.mkdir(parents=True, exist_ok=True)
    policy = DEFAULT_POLICY_TOML.replace(
        "allow_dangerous = false", f"allow_dangerous = {str(dangerous).lower()}"
    )
    (chorus_home / "policy.toml").write_text(policy)
    with ModelServer([shell("rm -rf sub"), text("done")]) as server:
        env = offline_env("gemini", tmp_path / "gemini-home", server.url)
        lines = ["[daemon]", "notifications = false", "[gateway]", "port = 0"]
        lines += ["[agents.gemini.env]", *(f"{k} = {json.dumps(v)}" for k, v in env.items())]
        (chorus_home / "config.toml").write_text("\n".join(lines) + "\n")
        try:
            events = _run(chorus_home, work, "--permission-mode", "bypassPermissions")
        finally:
            stop_daemon()
    results = [e for e in events if isinstance(e, ToolResult)]
    assert len(results) == 1
    if dangerous:  # --yolo: an elevated command ran unasked
        assert not results[0].is_error
        assert not (work / "sub").exists()
    else:  # fell back to acceptEdits: the elevated command asks, and -p cannot ask
        assert results[0].is_error
        assert (work / "sub").is_dir()
