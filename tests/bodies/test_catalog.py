"""The body catalog: every body's capability table, and ACP agents whose program is missing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from chorus.bodies import Support, body_catalog
from chorus.bodies.codex import CodexExecBody


def _config(home: Path) -> None:
    home.mkdir(parents=True, exist_ok=True)
    text = '[agents.mine]\nprotocol = "acp"\ncommand = "/nonexistent/mine-acp"\n'
    (home / "config.toml").write_text(text)


def test_every_body_is_listed_with_its_declared_capabilities(chorus_home: Path) -> None:
    _config(chorus_home)
    rows = {row.name: row for row in body_catalog()}
    assert set(rows) >= {"claude", "claude-print", "codex", "codex-exec", "gemini", "mine"}
    assert rows["claude"].capabilities.steer is Support.NATIVE
    assert rows["codex-exec"].capabilities == CodexExecBody.capabilities
    assert (rows["mine"].kind, rows["mine"].installed) == ("acp", False)
    assert rows["mine"].problem is not None
    assert "/nonexistent/mine-acp" in rows["mine"].problem


def test_agents_list_json_shows_capabilities_and_flags_missing_programs(
    chorus_home: Path,
) -> None:
    _config(chorus_home)
    result = subprocess.run(
        [sys.executable, "-m", "chorus", "agents", "list", "--json"],
        capture_output=True,
        text=True,
        env=os.environ.copy(),
        timeout=60,
        check=True,
    )
    bodies = {row["name"]: row for row in json.loads(result.stdout)["bodies"]}
    assert bodies["mine"]["installed"] is False
    assert bodies["mine"]["capabilities"]["interrupt"] == "native"
    assert bodies["codex"]["capabilities"]["steer"] == "native"
    assert bodies["gemini-headless"]["capabilities"]["permission_callback"] == "unsupported"
    # How each body's model learns the policy's reason for a refusal.
    reasons = {name: row["policy_reason"] for name, row in bodies.items()}
    assert reasons["claude"] == "same turn, in the tool result"
    assert reasons["codex"] == reasons["gemini"] == "same turn, in a message Chorus adds"
    assert {reasons[b] for b in ("claude-print", "codex-exec", "gemini-headless")} == {
        "with the next prompt (the CLI refuses in its own words)"
    }
    # What each body does not do as the others do, said where the matrix found it.
    limits = {name: " ".join(row["limits"]) for name, row in bodies.items()}
    assert "next prompt" in limits["claude-print"]
    assert "neither asked nor logged" in limits["codex-acp"]
    assert "rebuilt from Chorus's log" in limits["claude-code-acp"]
    assert limits["claude"] == limits["codex"] == ""
