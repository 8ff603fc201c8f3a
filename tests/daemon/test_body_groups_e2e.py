"""no process of any body survives ``chorus stop``, checked by process group.

Each body runs a slow turn under the daemon (real CLIs, scripted server); while the
turn streams, the daemon's children (each the leader of its body's process group)
are noted; ``chorus stop`` must leave no live process in any of those groups.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from chorus.bodies.acp import acp_agent
from chorus.client._paths import pid_path
from chorus.daemon import stop_daemon
from chorus.testing import ModelServer, offline_env, slow_text

pytestmark = pytest.mark.e2e
CLI_OF = {
    "claude": "claude",
    "claude-print": "claude",
    "codex": "codex",
    "codex-exec": "codex",
    "gemini": "gemini",
    "gemini-headless": "gemini",
    "claude-code-acp": "claude",
    "codex-acp": "codex",
}


@pytest.fixture
def daemon_home(chorus_home: Path, tmp_path: Path) -> Iterator[tuple[ModelServer, Path]]:
    work = tmp_path / "work"
    work.mkdir()
    with ModelServer() as server:
        lines = ["[daemon]", "notifications = false", "[gateway]", "port = 0"]
        for body, cli in CLI_OF.items():
            if body not in ("claude", "codex", "gemini", "claude-code-acp", "codex-acp"):
                continue
            env = offline_env(cli, tmp_path / f"{body}-home", server.url)  # type: ignore[arg-type]
            lines += [f"[agents.{body}.env]", *(f"{k} = {json.dumps(v)}" for k, v in env.items())]
        chorus_home.mkdir(parents=True, exist_ok=True)
        (chorus_home / "config.toml").write_text("\n".join(lines) + "\n")
        yield server, work
        stop_daemon()


def _live_groups(pgids: set[int]) -> list[str]:
    """``ps`` rows of live (not zombie) processes in ``pgids``."""
    rows = subprocess.run(
        ["ps", "-eo", "pid=,pgid=,stat=,args="], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    live = []
    for row in rows:
        pid, pgid, stat, *args = row.split(None, 3)
        if int(pgid) in pgids and not stat.startswith("Z"):
            live.append(f"{pid} {pgid} {stat} {' '.join(args)[:120]}")
    return live


def _children(pid: int) -> set[int]:
    out = subprocess.run(
        ["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True
    ).stdout
    return {int(p) for p in out.split()}


def _wait(predicate: object, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return True
        time.sleep(0.2)
    return False


@pytest.mark.parametrize("body", list(CLI_OF))
def test_chorus_stop_mid_turn_leaves_no_process_of_the_body(
    body: str, daemon_home: tuple[ModelServer, Path]
) -> None:
    if body.endswith("-acp"):
        try:
            acp_agent(body).executable()
        except Exception as exc:
            pytest.skip(str(exc))
    server, work = daemon_home
    words = " ".join(f"w{i}" for i in range(60))
    server.script([slow_text(words, chunks=60, delay=0.5)])
    ask = subprocess.Popen(
        [sys.executable, "-m", "chorus", "ask", "talk slowly", "--body", body, "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=work,
        env=os.environ.copy(),
    )
    try:
        server.wait_for(lambda requests: any(r.kind == "turn" for r in requests), timeout=90)
        daemon = int(pid_path().read_text())
        groups = {os.getpgid(child) for child in _children(daemon)}
        assert groups, "the daemon runs no body process mid-turn"
        assert all(group != os.getpgid(daemon) for group in groups)
        stopped = subprocess.run(
            [sys.executable, "-m", "chorus", "stop"], capture_output=True, text=True, timeout=60
        )
        assert stopped.returncode == 0, stopped.stderr
        from chorus.client._paths import log_path

        log = log_path().read_text(errors="replace")[-3000:] if log_path().exists() else ""
        assert _wait(lambda: not _live_groups(groups), 15), (_live_groups(groups), log)
    finally:
        ask.kill()
        ask.communicate()
