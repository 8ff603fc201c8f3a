"""The typer app loads only the module of the command it runs; the map that says
which module that is matches what each module adds."""

from __future__ import annotations

import subprocess
import sys

from chorus.cli._app import MODULES, OWNER

_PROBE = """
import sys
from chorus.cli._app import MODULES, _register, app

def names():
    out = {c.name or c.callback.__name__.replace("_", "-") for c in app.registered_commands}
    return out | {g.name or g.typer_instance.info.name for g in app.registered_groups}

if sys.argv[1] == "--owners":
    seen = set()
    for module in MODULES:
        __import__(f"chorus.cli.{module}")
        now = names()
        for name in sorted(now - seen):
            print(name, module)
        seen = now
else:
    _register(sys.argv[1:])
    loaded = [m for m in sys.modules if m.startswith("chorus.cli._") and m.endswith("_cmd")]
    print(" ".join(sorted(loaded)))
"""


def _probe(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, *args], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_owner_map_names_the_module_that_adds_each_command() -> None:
    added = dict(line.split() for line in _probe("--owners").splitlines())
    assert added == OWNER
    assert set(OWNER.values()) == set(MODULES)


def test_a_command_loads_its_own_module_only() -> None:
    assert _probe("routine", "list").split() == ["chorus.cli._routine_cmd"]
    assert _probe("team", "--help").split() == ["chorus.cli._team_cmd"]


def test_help_and_an_unknown_command_load_every_module() -> None:
    everything = sorted(f"chorus.cli.{m}" for m in MODULES)
    assert _probe("--help").split() == everything
    assert _probe("no-such-command").split() == everything


def test_an_unknown_command_is_still_told_what_exists() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "chorus", "routin"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 2
    assert "routin" in done.stderr
