"""Creating routines from TOML text and from the ``schedule_routine`` tool's spec."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from chorus.routines import RoutineError, create_routine, routine_toml, schedule_routine


def test_schedule_routine_writes_a_valid_routine_file(chorus_home: Path) -> None:
    spec = {
        "name": "follow-up",
        "schedule": "30 8 * * 1",
        "timezone": "America/New_York",
        "model_preference": "claude",
        "prompt": 'check the "deploy" and say \\ so',
    }
    result = schedule_routine(chorus_home, spec)
    assert result == {
        "name": "follow-up",
        "file": str(chorus_home / "routines" / "follow-up.toml"),
        "trigger": "cron",
        "timezone": "America/New_York",
    }
    data = tomllib.loads((chorus_home / "routines" / "follow-up.toml").read_text())
    assert data["routine"]["task"]["prompt"] == 'check the "deploy" and say \\ so'
    assert data["routine"]["schedule"] == "30 8 * * 1"


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ({"name": "x", "schedule": "every day", "timezone": "UTC", "prompt": "p"}, "bad cron"),
        ({"name": "x", "every": "1h", "prompt": "p", "tags": ["a"]}, "routine.tags"),
        ({"name": "x", "every": "1h", "prompt": "p", "evil] = 1\n[x": 1}, "not a routine key"),
        ({"name": "heartbeat", "every": "1h", "prompt": "p"}, "built-in"),
        ({"every": "1h", "prompt": "p"}, "routine.name"),
    ],
)
def test_a_bad_spec_writes_nothing(chorus_home: Path, spec: dict[str, object], words: str) -> None:
    with pytest.raises(RoutineError) as info:
        schedule_routine(chorus_home, spec)
    assert words in str(info.value)
    assert list(chorus_home.glob("routines/*")) == []


def test_create_refuses_to_overwrite_an_existing_routine(chorus_home: Path) -> None:
    text = routine_toml({"every": "1h", "prompt": "p"})
    create_routine(chorus_home, text, name="hourly")
    with pytest.raises(RoutineError, match="exists"):
        create_routine(chorus_home, text.replace("1h", "2h"), name="hourly")
    assert 'every = "1h"' in (chorus_home / "routines" / "hourly.toml").read_text()
