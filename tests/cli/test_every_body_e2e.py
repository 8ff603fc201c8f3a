"""The answer shows on every kind of body, piped (the answer only) and on the
event view (text once), through the daemon with the real CLIs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from chorus.daemon import stop_daemon
from chorus.testing import ModelServer, offline_env, shell, text

pytestmark = pytest.mark.e2e

#: body -> the CLI whose [agents.<cli>.env] it runs with
BODIES = {"gemini": "gemini", "gemini-headless": "gemini", "codex-exec": "codex", "codex": "codex"}


@pytest.fixture
def served(chorus_home: Path, tmp_path: Path) -> Iterator[tuple[ModelServer, Path]]:
    work = tmp_path / "work"
    work.mkdir()
    chorus_home.mkdir(parents=True, exist_ok=True)
    with ModelServer() as server:
        lines = ["[daemon]", "notifications = false", "[gateway]", "port = 0"]
        for cli in ("gemini", "codex"):
            env = offline_env(cli, tmp_path / f"{cli}-home", server.lane_url(cli))
            lines += [f"[agents.{cli}.env]", *(f"{k} = {json.dumps(v)}" for k, v in env.items())]
        (chorus_home / "config.toml").write_text("\n".join(lines) + "\n")
        try:
            yield server, work
        finally:
            stop_daemon()
    assert server.errors == []


def _ask(work: Path, body: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "chorus", "ask", "make it", "--body", body, *extra],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=work,
        env=os.environ.copy(),
    )


@pytest.mark.parametrize("body", sorted(BODIES))
def test_the_answer_shows_on_every_body(served: tuple[ModelServer, Path], body: str) -> None:
    server, work = served
    lane = BODIES[body]
    server.script([shell("echo hi > out.txt"), text("Answer from the body.")], lane=lane)
    piped = _ask(work, body)
    assert piped.returncode == 0, piped.stderr[-2000:]
    assert piped.stdout == "Answer from the body.\n"
    server.script([text("Second answer.")], lane=lane)
    shown = _ask(work, body, "--format", "events")
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert shown.stdout.count("Second answer.") == 1, shown.stdout
    assert "=None" not in shown.stdout
    assert "job succeeded" in shown.stdout
