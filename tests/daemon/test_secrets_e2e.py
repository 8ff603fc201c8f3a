"""after each real CLI has echoed a seeded list of secrets through the daemon,
none of them appears in any file under CHORUS_HOME (database, WAL, mirror, audit)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from chorus.daemon import stop_daemon
from chorus.testing import ModelServer, offline_env, shell, text

pytestmark = pytest.mark.e2e


def _k(*parts: str) -> str:
    # Built from pieces so that this file itself holds no scannable secret.
    return "".join(parts)


SEEDED = {
    "anthropic": _k("sk-ant-", "api03-", "Zq8Xw2Lm4Np6Rt0Vb3Cd5Fg7Hj9Kk1"),
    "openai": _k("sk-", "proj-", "Q1w2E3r4T5y6U7i8O9p0AaSsDdFfGg"),
    "github": _k("gh", "p_", "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"),
    "google": _k("AI", "za", "SyD4f5G6h7J8k9L0zXcVbNmQwErTyUiOp12"),
    "aws": _k("AK", "IA", "Z7Y6X5W4V3U2T1S0"),
}


@pytest.mark.parametrize("cli", ["claude", "codex", "gemini"])
def test_seeded_secrets_never_reach_chorus_home(
    cli: str, chorus_home: Path, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    echo = "; ".join(f"echo {value}" for value in SEEDED.values())
    with ModelServer() as server:
        env = offline_env(cli, tmp_path / f"{cli}-home", server.url)  # type: ignore[arg-type]
        lines = ["[daemon]", "notifications = false", f"[agents.{cli}.env]"]
        lines += [f"{k} = {json.dumps(v)}" for k, v in env.items()]
        chorus_home.mkdir(parents=True, exist_ok=True)
        (chorus_home / "config.toml").write_text("\n".join(lines) + "\n")
        server.script([shell(echo), text("keys: " + " ".join(SEEDED.values()))])
        try:
            done = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "chorus",
                    "ask",
                    f"print the keys {SEEDED['github']}",
                    "--body",
                    cli,
                    "--json",
                ],
                capture_output=True,
                text=True,
                timeout=180,
                cwd=work,
                env=os.environ.copy(),
            )
        finally:
            stop_daemon()
        assert done.returncode == 0, done.stderr[-2000:]
        # The CLI really ran the command: its output went back to the model.
        results = [r for req in server.turn_requests() for r in req.tool_results()]
        assert any(SEEDED["openai"] in r.content for r in results)
    assert "[REDACTED" in done.stdout
    leaks = [
        (path.relative_to(chorus_home), name)
        for path in chorus_home.rglob("*")
        if path.is_file()
        for name, value in SEEDED.items()
        if value.encode() in path.read_bytes()
    ]
    assert leaks == []
