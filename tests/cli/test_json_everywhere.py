"""Every reading command has ``--json``: run each through the real entry point and
parse what it prints."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from chorus.bodies import PermissionAsk
from chorus.policy import FlagBoard


def _json(*args: str) -> object:
    done = subprocess.run(
        [sys.executable, "-m", "chorus", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=os.environ.copy(),
    )
    assert done.returncode == 0, (args, done.stderr)
    return json.loads(done.stdout)


def test_flags_json_lists_pending_questions(chorus_home: Path) -> None:
    assert _json("flags", "--json") == []
    ask = PermissionAsk("codex", "shell", "commandExecution", {"command": "git push"})
    flag = FlagBoard().raise_flag(ask, reason="elevated risk", default="deny", timeout_s=60)
    rows = _json("flags", "--json")
    assert isinstance(rows, list)
    assert [(r["id"], r["body"], r["default"]) for r in rows] == [(flag.id, "codex", "deny")]


def test_secret_list_json_has_names_never_values(chorus_home: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "chorus", "secret", "set", "API_TOKEN", "--value", "v-123456789"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    rows = _json("secret", "list", "--json")
    assert isinstance(rows, list)
    assert [r["name"] for r in rows] == ["API_TOKEN"]
    assert "v-123456789" not in json.dumps(rows)


def test_agents_list_and_doctor_json(chorus_home: Path) -> None:
    listed = _json("agents", "list", "--json")
    agents = listed["agents"]
    assert {b["name"] for b in listed["bodies"]} >= {"claude", "codex", "gemini"}
    names = {a["name"] for a in agents}
    assert {"claude", "codex", "gemini"} <= names
    doctor = _json("doctor", "--json")
    assert isinstance(doctor, dict)
    assert doctor["config"] == "ok"
    assert {a["name"] for a in doctor["agents"]} == names
    assert all("auth" in a for a in doctor["agents"])
    assert doctor["sandbox"].startswith(("bubblewrap /", "no sandbox tool"))


def test_sessions_and_jobs_json_on_a_fresh_home(chorus_home: Path) -> None:
    assert _json("jobs", "--json") == []
    assert _json("sessions", "list", "--json") == []
    status = _json("status", "--json")
    assert (status["daemon"], status["source"], status["jobs"]) == ("not running", "log", {})


def test_audit_secret_and_gateway_token_json(chorus_home: Path) -> None:
    stored = _json("secret", "set", "API_TOKEN", "--value", "v-987654321", "--json")
    assert isinstance(stored, dict)
    assert stored["name"] == "API_TOKEN"
    assert "v-987654321" not in json.dumps(stored)
    assert _json("secret", "scan", "--json") == {"leaks": []}
    verified = _json("audit", "verify", "--json")
    assert isinstance(verified, dict)
    assert verified["ok"] is True
    assert verified["entries"] >= 1  # the secret_set above
    assert _json("secret", "rm", "API_TOKEN", "--json") == {"removed": "API_TOKEN"}
    token = _json("gateway", "token", "--json")
    assert isinstance(token, dict)
    assert len(token["token"]) >= 32
    assert _json("integrity", "status", "--json") == {
        "files": [
            {"name": n, "path": str(chorus_home / p), "baseline": None, "current": "absent",
             "accepted_at": None, "ok": True}
            for n, p in [("SOUL.md", "workspace/SOUL.md"), ("MEMORY.md", "memory/MEMORY.md"),
                         ("policy.toml", "policy.toml"), ("config.toml", "config.toml")]
        ],
        "quarantined": [],
    }  # fmt: skip
