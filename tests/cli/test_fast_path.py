"""The fast path of the entry point: argv parsing, the typer commands built from the
same table (both parsers give the runner the same values), and what it imports
(nothing heavy before the socket)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import typer.main
from typer.testing import CliRunner

from chorus.cli import app
from chorus.cli._fast import RUN, SPECS, SUMMARY, command_of, parse
from chorus.daemon import is_responding
from chorus.testing import text

if TYPE_CHECKING:
    from conftest import Chorus

HEAVY = (
    *("typer", "rich", "pydantic", "httpx", "starlette", "uvicorn", "chorus.events"),
    *("chorus.store", "chorus.config", "chorus.bodies", "asyncio", "http.client", "email"),
)


def test_parse_takes_options_in_every_spelling() -> None:
    spec = SPECS["ask"]
    values = parse(spec, ["hi", "-b", "claude", "--model=m1", "--json", "--", "--cwd"])
    assert values is None  # two positionals: not plainly `ask`
    values = parse(spec, ["-b", "claude", "--model=m1", "--json", "--", "--not-an-option"])
    assert values is not None
    assert values["body"] == "claude"
    assert values["model"] == "m1"
    assert values["as_json"] is True
    assert values["prompt"] == "--not-an-option"


@pytest.mark.parametrize(
    "args", [["--help"], ["hi", "--bogus"], ["hi", "--body"], [], ["-h", "hi"]]
)
def test_anything_unusual_falls_through_to_typer(args: list[str]) -> None:
    assert parse(SPECS["ask"], args) is None


#: argv of each everyday command, as both parsers must read it.
SAME_ARGV = [
    ["ask", "fix it", "-b", "codex", "--model=gpt-5", "--worktree", "--rounds", "2", "--json"],
    ["ask", "plan", "--framework", "consensus", "--planners", "claude,codex", "--no-failover"],
    ["task", "later", "--session", "abc", "--permission-mode", "plan", "--no-worktree"],
    ["watch"],
    ["watch", "j1", "--format", "text"],
    ["steer", "j1", "go on", "--json"],
    ["steer", "--team", "crew", "--member", "dev", "hello"],
    ["jobs", "--state", "running"],
    ["status", "--json"],
    ["start", "--json"],
    ["log", "j1", "--json"],
    ["sessions", "list", "--limit", "7", "--json"],
    ["sessions", "list"],
    ["stop", "--cancel-jobs", "--json"],
    ["stop", "--keep-bodies"],
    ["interrupt", "j1", "--json"],
]


def _named(argv: list[str]) -> tuple[str, list[str]]:
    found = command_of(argv)
    assert found is not None, argv
    return found


def _typer_values(monkeypatch: pytest.MonkeyPatch, argv: list[str]) -> dict[str, object]:
    """The values the typer command hands to the runner for ``argv``."""
    seen: dict[str, object] = {}

    def runner(values: dict[str, object]) -> int:
        seen.update(values)
        return 0

    monkeypatch.setitem(RUN, _named(argv)[0], runner)
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 0, result.output
    return seen


@pytest.mark.parametrize("argv", SAME_ARGV, ids=lambda argv: " ".join(argv))
def test_both_parsers_hand_the_runner_the_same_values(
    monkeypatch: pytest.MonkeyPatch, argv: list[str]
) -> None:
    name, args = _named(argv)
    fast = parse(SPECS[name], args)
    assert fast is not None
    given = {k: v for k, v in _typer_values(monkeypatch, argv).items() if v is not None}
    assert given == fast


def test_every_everyday_command_is_a_typer_command_of_the_table() -> None:
    root = typer.main.get_command(app)
    for name in SPECS:
        command = root
        for word in name.split():
            command = command.commands[word]  # type: ignore[attr-defined]
        assert command.help == SUMMARY[name]
        options = {o for p in command.params for o in p.opts}
        spec = SPECS[name]
        assert options == {*spec.options, *spec.flags, *spec.positionals}
    assert {_named(argv)[0] for argv in SAME_ARGV} == set(SPECS)


def test_a_number_option_that_is_not_one_falls_through_to_typer() -> None:
    spec = SPECS["sessions list"]
    assert parse(spec, []) == {"as_json": False, "limit": 50}
    assert parse(spec, ["--limit=3"]) == {"as_json": False, "limit": 3}
    assert parse(spec, ["--limit", "many"]) is None
    done = subprocess.run(
        [sys.executable, "-m", "chorus", "sessions", "list", "--limit", "many"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "Invalid value for '--limit'" in done.stderr


def _imports(chorus: Chorus, *args: str) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "chorus", *args],
        capture_output=True,
        text=True,
        timeout=90,
        cwd=chorus.work,
        env=os.environ.copy(),
    )
    names = {
        line.rsplit("|", 1)[1].strip()
        for line in done.stderr.splitlines()
        if line.startswith("import time:")
    }
    return done, names


def _heavy(names: set[str]) -> set[str]:
    return {n for n in names if n.split(".")[0] in HEAVY or n.startswith(HEAVY)}


@pytest.mark.e2e
def test_everyday_commands_load_nothing_heavy(chorus: Chorus) -> None:
    chorus.server.script([text("light"), text("lighter")])
    assert chorus.run("start").returncode == 0
    asked, names = _imports(chorus, "ask", "hi", "--body", "claude", "--json")
    assert asked.returncode == 0, asked.stderr[-2000:]
    assert _heavy(names) == set()
    job_id = json.loads(asked.stdout.splitlines()[-1])["job_id"]
    for args in (
        ("jobs",),
        ("jobs", "--json"),
        ("status", "--json"),
        ("watch", job_id[:8], "--json"),
        ("task", "again", "--body", "claude"),
    ):
        done, names = _imports(chorus, *args)
        assert done.returncode == 0, (args, done.stderr[-2000:])
        assert _heavy(names) == set(), args


def test_no_daemon_jobs_and_status_stay_light(chorus_home: object) -> None:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "chorus", "jobs"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0
    assert done.stdout == "no jobs\n"
    assert "pydantic" not in done.stderr
    assert not is_responding()


def test_version() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "chorus", "--version"], capture_output=True, text=True, timeout=60
    )
    from chorus import __version__

    assert done.returncode == 0
    assert done.stdout == f"chorus {__version__}\n"


@pytest.mark.parametrize("name", sorted(SPECS))
def test_fast_help_names_every_option_and_loads_nothing_heavy(name: str) -> None:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "chorus", *name.split(), "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0
    spec = SPECS[name]
    assert all(flag in done.stdout for flag in [*spec.options, *spec.flags])
    assert done.stdout.startswith(f"Usage: chorus {name} [OPTIONS]")
    names = {
        line.rsplit("|", 1)[1].strip()
        for line in done.stderr.splitlines()
        if line.startswith("import time:")
    }
    assert _heavy(names) == set()


def test_steer_of_an_unknown_job_with_no_daemon_exits_2_and_writes_nothing(
    chorus_home: Path,
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "chorus", "steer", "nosuchjob", "hello"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "unknown job 'nosuchjob'" in done.stderr
    assert not chorus_home.exists()
