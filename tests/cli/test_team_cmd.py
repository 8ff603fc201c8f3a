"""``chorus team ...`` refuses bad input with exit 2 before any daemon starts, and
writes nothing (no team folder, no daemon socket)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from chorus.teams import Member, TeamConfig
from chorus.teams._config import save_team


def _chorus(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "chorus", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=os.environ.copy(),
    )


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["team", "create", "t"], "at least one member"),
        (["team", "create", "t", "--member", "a"], "use NAME=BODY"),
        (["team", "create", "t", "--member", "a=nobody"], "unknown body 'nobody'"),
        (["team", "create", "t", "--member", "coordinator=claude"], "reserved"),
        (["team", "create", "Bad!", "--member", "a=claude"], "bad team name"),
        (["team", "create", "t", "--member", "a=claude", "--coordinator", "x"], "unknown body"),
        (["team", "status", "nope"], "unknown team 'nope'"),
        (["team", "send", "nope", "a", "hi"], "unknown team"),
        (["team", "run", "nope", "task"], "unknown team"),
        (["team", "teardown", "nope"], "unknown team"),
        (["steer", "--team", "nope", "--member", "a", "hi"], "unknown team"),
        (["steer", "--team", "nope", "hi"], "give both --team and --member"),
    ],
)
def test_bad_input_exits_2_and_writes_nothing(
    chorus_home: Path, args: list[str], says: str
) -> None:
    done = _chorus(*args)
    assert done.returncode == 2, done.stderr
    assert says in done.stderr
    assert not (chorus_home / "teams").exists()
    assert not (chorus_home / "run" / "chorus.sock").exists()


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["team", "send", "t", "ghost", "hi"], "no member 'ghost'"),
        (["team", "run", "t", "x", "--assign", "ghost=do"], "no member 'ghost'"),
        (["team", "run", "t", "x", "--assign", "coordinator=do"], "no member 'coordinator'"),
        (["team", "run", "t", "x", "--assign", "a"], "use MEMBER=TEXT"),
        (["team", "run", "t", "x", "--cwd", "/nonexistent/dir"], "does not exist"),
        (["steer", "--team", "t", "--member", "ghost", "hi"], "no member 'ghost'"),
    ],
)
def test_an_unknown_member_exits_2_before_a_daemon_starts(
    chorus_home: Path, args: list[str], says: str
) -> None:
    save_team(TeamConfig(name="t", members={"a": Member(body="claude")}))
    done = _chorus(*args)
    assert done.returncode == 2, done.stderr
    assert says in done.stderr
    assert not (chorus_home / "run" / "chorus.sock").exists()


def test_list_with_no_team_says_how_to_make_one(chorus_home: Path) -> None:
    done = _chorus("team", "list")
    assert done.returncode == 0
    assert "chorus team create" in done.stdout
    assert _chorus("team", "list", "--json").stdout.strip() == "[]"
