"""``chorus doctor`` shows every body's capability table, config-defined ACP agents
included, and flags a body whose program is missing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def _doctor(*extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "chorus", "doctor", *extra],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "200"},
    )


def _add_missing_acp_agent(home: Path) -> None:
    home.mkdir(parents=True, exist_ok=True)
    config = home / "config.toml"
    config.write_text('[agents.mine]\nprotocol = "acp"\ncommand = "/opt/nowhere/mine"\n')


def test_doctor_json_has_capabilities_per_body(chorus_home: Path) -> None:
    _add_missing_acp_agent(chorus_home)
    done = _doctor("--json")
    assert done.returncode == 0, done.stderr
    bodies = {b["name"]: b for b in json.loads(done.stdout)["bodies"]}
    assert bodies["codex"]["capabilities"]["steer"] == "native"
    assert bodies["gemini"]["capabilities"]["fork"] == "unsupported"
    assert bodies["mine"]["kind"] == "acp"
    assert bodies["mine"]["installed"] is False
    assert "/opt/nowhere/mine" in bodies["mine"]["problem"]


def test_doctor_table_flags_the_missing_binary(chorus_home: Path) -> None:
    _add_missing_acp_agent(chorus_home)
    done = _doctor()
    assert done.returncode == 0, done.stderr
    assert "native" in done.stdout
    assert "emulated" in done.stdout
    row = next(line for line in done.stdout.splitlines() if "mine" in line)
    assert "no" in row
