"""What the everyday commands load when a daemon runs: only the stdlib socket client
and the plain renderer, never pydantic, typer, rich, the store or the config (they
cost a command hundreds of milliseconds). Checked on the modules the process holds
when it ends, not on a clock. The help and typo paths (typer's) still answer."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from chorus.client import DaemonClient, is_responding
from chorus.testing import text
from tests._wait import until

if TYPE_CHECKING:
    from conftest import Chorus

#: Runs the CLI on argv[2:], then writes the names of every module loaded to argv[1]
#: (the fast path ends the process with ``os._exit``: the names are written first).
WRAPPER = """
import os, sys
out, sys.argv = sys.argv[1], ["chorus", *sys.argv[2:]]
end = os._exit

def listed():
    names = sorted(sys.modules)
    import json
    with open(out, "w") as f:
        json.dump(names, f)

def exit_listed(code):
    listed()
    end(code)

os._exit = exit_listed
try:
    from chorus.cli import main
    main()
finally:
    listed()
"""

#: Never loaded by a command a running daemon answers.
HEAVY = (
    "pydantic",
    "typer",
    "rich",
    "chorus.store",
    "chorus.config",
    "chorus.events",
    "chorus.bodies",
    "asyncio",
    "http.client",
    "email",
    "ssl",
)


def run_listing(
    work: Path, tmp: Path, *args: str
) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """Run ``chorus ARGS`` in a subprocess; its result and the modules it loaded."""
    out = tmp / "modules.json"
    done = subprocess.run(
        [sys.executable, "-c", WRAPPER, str(out), *args],
        capture_output=True,
        text=True,
        timeout=90,
        cwd=work,
    )
    return done, json.loads(out.read_text())


def heavy(modules: list[str]) -> list[str]:
    return [m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY)]


def test_the_listing_sees_a_heavy_import(chorus_home: Path, tmp_path: Path) -> None:
    """The check can fail: a command of the typer app loads typer and rich."""
    done, modules = run_listing(tmp_path, tmp_path, "schema", "--help")
    assert done.returncode == 0, done.stderr
    assert {"typer", "rich"} <= set(heavy(modules))


@pytest.mark.e2e
def test_read_commands_against_a_daemon_load_nothing_heavy(chorus: Chorus, tmp_path: Path) -> None:
    chorus.server.script([text("light")])
    assert chorus.run("start").returncode == 0
    asked = chorus.run("ask", "hi", "--body", "claude", "--json")
    assert asked.returncode == 0, asked.stderr[-2000:]
    job = json.loads(asked.stdout.splitlines()[-1])["job_id"]
    client = DaemonClient(autostart=False)
    # the session notes the CLI's session id just after the job ends: wait for it
    until(lambda: all(s.get("native_session_id") for s in client.sessions()))
    expected = {
        ("jobs", "--json"): client.jobs(),
        ("sessions", "list", "--json"): client.sessions(),
    }
    for args in (
        ("status", "--json"),
        ("jobs", "--json"),
        ("jobs",),
        ("status",),
        ("sessions", "list", "--json"),
        ("log", job[:8], "--json"),
        ("watch", job[:8], "--json"),
    ):
        done, modules = run_listing(chorus.work, tmp_path, *args)
        assert done.returncode == 0, (args, done.stderr[-2000:])
        assert heavy(modules) == [], args
        if args in expected:
            assert json.loads(done.stdout) == expected[args], args
    status = json.loads(run_listing(chorus.work, tmp_path, "status", "--json")[0].stdout)
    assert status["daemon"] == "running"
    assert status["jobs"] == {"succeeded": 1}
    logged = run_listing(chorus.work, tmp_path, "log", job, "--json")[0].stdout.splitlines()
    assert json.loads(logged[-1])["type"] == "job_ended"
    assert [json.loads(line)["job_id"] for line in logged] == [job] * len(logged)
    done, modules = run_listing(chorus.work, tmp_path, "interrupt", job[:8], "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout) == {"result": "not running (succeeded)"}
    assert heavy(modules) == []
    done, modules = run_listing(chorus.work, tmp_path, "stop", "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout) == {
        "stopped": True,
        "left": [],
        "cancelled": [],
        "ended_bodies": 0,
        "kept_bodies": False,
    }
    assert heavy(modules) == []
    assert not is_responding()


def test_stop_with_no_daemon_says_so_and_loads_nothing_heavy(
    chorus_home: Path, tmp_path: Path
) -> None:
    done, modules = run_listing(tmp_path, tmp_path, "stop")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "no daemon was running\n"
    assert heavy(modules) == []
    done, modules = run_listing(tmp_path, tmp_path, "stop", "--json", "--keep-bodies")
    assert json.loads(done.stdout) == {
        "stopped": False,
        "left": [],
        "cancelled": [],
        "ended_bodies": 0,
        "kept_bodies": False,
    }
    assert not (chorus_home / "run" / "keep-bodies").exists()  # nothing to keep
    assert heavy(modules) == []


def test_help_and_typos_still_go_to_typer(chorus_home: Path, tmp_path: Path) -> None:
    done, modules = run_listing(tmp_path, tmp_path, "--help")
    assert done.returncode == 0
    assert "typer" in modules
    for name in ("status", "jobs", "log", "sessions", "agents"):
        assert name in done.stdout
    done, _ = run_listing(tmp_path, tmp_path, "sessions", "--help")
    assert done.returncode == 0
    assert "list" in done.stdout
    assert "show" in done.stdout
    done, _ = run_listing(tmp_path, tmp_path, "jbos")
    assert done.returncode == 2
    assert "No such command 'jbos'" in done.stderr
    done, _ = run_listing(tmp_path, tmp_path, "jobs", "--bogus")
    assert done.returncode == 2
    assert "No such option: --bogus" in done.stderr
    done, modules = run_listing(tmp_path, tmp_path, "sessions", "list", "--help")
    assert done.returncode == 0
    assert done.stdout.startswith("Usage: chorus sessions list [OPTIONS]")
    assert heavy(modules) == []
    assert not chorus_home.exists()  # no help or typo started a daemon or wrote a file
