"""a value from ``[agents.*.env]`` that matches no known key format is still
a secret: a real CLI echoes it through the daemon, the model sees it (the command
ran), and no file under CHORUS_HOME holds it."""

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

#: Opaque: no prefix, no known format, only the config says it is there.
OPAQUE = "".join(["q7Zt0p", "Lx9VwC", "4mRbH2"])


@pytest.mark.parametrize("cli", ["claude", "codex"])
def test_an_opaque_agent_env_value_echoed_by_a_real_cli_is_redacted(
    cli: str, chorus_home: Path, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    with ModelServer() as server:
        env = offline_env(cli, tmp_path / f"{cli}-home", server.url)  # type: ignore[arg-type]
        env["CHORUS_TEST_OPAQUE"] = OPAQUE
        lines = ["[daemon]", "notifications = false", f"[agents.{cli}.env]"]
        lines += [f"{k} = {json.dumps(v)}" for k, v in env.items()]
        chorus_home.mkdir(parents=True, exist_ok=True)
        (chorus_home / "config.toml").write_text("\n".join(lines) + "\n")
        server.script([shell('echo "value=$CHORUS_TEST_OPAQUE"'), text(f"it is {OPAQUE}")])
        try:
            done = subprocess.run(
                [sys.executable, "-m", "chorus", "ask", "print it", "--body", cli, "--json"],
                capture_output=True,
                text=True,
                timeout=180,
                cwd=work,
                env=os.environ.copy(),
            )
        finally:
            stop_daemon()
        assert done.returncode == 0, done.stderr[-2000:]
        results = [r for req in server.turn_requests() for r in req.tool_results()]
        assert any(f"value={OPAQUE}" in r.content for r in results)  # the CLI really echoed it
    assert OPAQUE not in done.stdout
    assert "[REDACTED" in done.stdout
    leaks = [
        path.relative_to(chorus_home)
        for path in chorus_home.rglob("*")
        if path.is_file() and path.name != "config.toml" and OPAQUE.encode() in path.read_bytes()
    ]  # config.toml is where the user wrote it
    assert leaks == []
