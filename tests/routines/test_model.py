"""Routine files: validation errors name the file and the key; one bad file leaves the
others loaded."""

from __future__ import annotations

from pathlib import Path

import pytest

from chorus.config import ChorusConfig
from chorus.routines._load import load_routines, routines_dir
from chorus.routines._schedule import Cron, Every

BODIES = ["claude", "codex", "gemini"]


def write(name: str, text: str) -> Path:
    path = routines_dir() / f"{name}.toml"
    path.write_text(text)
    return path


GOOD = """
[routine]
schedule = "0 9 * * 1-5"
timezone = "Europe/Paris"
model_preference = "claude"
[routine.task]
prompt = "summarize {date}"
"""


def load(config: ChorusConfig | None = None) -> tuple[dict[str, object], dict[str, str]]:
    loaded = load_routines(config or ChorusConfig(), BODIES)
    return dict(loaded.valid), {bad.name: bad.error for bad in loaded.invalid}


def test_a_good_cron_routine_loads_with_its_defaults(chorus_home: Path) -> None:
    write("daily", GOOD)
    valid, invalid = load()
    assert invalid == {}
    routine = valid["daily"]
    assert routine.kind == "cron"  # type: ignore[attr-defined]
    assert routine.schedule == Cron("0 9 * * 1-5", routine.tz())  # type: ignore[attr-defined]
    assert routine.catch_up == "run_latest_once"  # type: ignore[attr-defined]
    assert routine.concurrency == "coalesce_if_active"  # type: ignore[attr-defined]
    assert routine.cwd == str(chorus_home / "workspace")  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("text", "key", "words"),
    [
        (GOOD.replace("0 9 * * 1-5", "61 9 * * *"), "routine.schedule", "bad cron"),
        (GOOD.replace("Europe/Paris", "Mars/Olympus"), "routine.timezone", "unknown timezone"),
        (GOOD.replace('"claude"', '"hal9000"'), "routine.model_preference", "unknown body"),
        (GOOD.replace('timezone = "Europe/Paris"\n', ""), "routine.timezone", "never assumes UTC"),
        (
            GOOD.replace(
                'schedule = "0 9 * * 1-5"', 'trigger = "file_change"\nwatch_path = "/nope"'
            ),
            "routine.watch_path",
            "does not exist",
        ),
        (GOOD.replace('schedule = "0 9 * * 1-5"', 'every = "soon"'), "routine.every", "duration"),
        (GOOD + "\nsurprise = 1\n", "surprise", "Extra inputs"),
        (GOOD.replace('prompt = "summarize {date}"', ""), "routine.task.prompt", "required"),
        ("[routine\n", "not valid TOML", ""),
    ],
)
def test_a_bad_routine_is_refused_naming_file_and_key_and_others_still_load(
    text: str, key: str, words: str
) -> None:
    write("daily", GOOD)
    bad = write("broken", text)
    valid, invalid = load()
    assert list(valid) == ["daily"]
    assert str(bad) in invalid["broken"]
    assert key in invalid["broken"]
    assert words in invalid["broken"]


def test_the_configured_default_timezone_is_used_when_a_routine_names_none() -> None:
    write("daily", GOOD.replace('timezone = "Europe/Paris"\n', ""))
    config = ChorusConfig.model_validate({"routines": {"timezone": "Asia/Tokyo"}})
    valid, invalid = load(config)
    assert invalid == {}
    assert valid["daily"].timezone == "Asia/Tokyo"  # type: ignore[attr-defined]


def test_interval_file_change_and_manual_routines(tmp_path: Path) -> None:
    write("tick", '[routine]\nevery = "15m"\n[routine.task]\nprompt = "p"\n')
    write(
        "watch",
        f'[routine]\ntrigger = "file_change"\nwatch_path = "{tmp_path}"\ndebounce = "500ms"\n'
        '[routine.task]\nprompt = "changed: {trigger_path}"\n',
    )
    write("byhand", '[routine]\ntrigger = "manual"\n[routine.task]\nprompt = "p"\n')
    valid, invalid = load()
    assert invalid == {}
    assert valid["tick"].schedule == Every(900.0)  # type: ignore[attr-defined]
    assert valid["watch"].debounce_s == 0.5  # type: ignore[attr-defined]
    assert valid["watch"].watch_path == str(tmp_path)  # type: ignore[attr-defined]
    assert valid["byhand"].schedule is None  # type: ignore[attr-defined]


def test_two_schedules_and_a_name_that_differs_from_the_file_are_refused() -> None:
    write("two", GOOD.replace('schedule = "0 9 * * 1-5"', 'schedule = "0 9 * * *"\nevery = "1h"'))
    write("named", GOOD.replace("[routine]", '[routine]\nname = "other"'))
    _, invalid = load()
    assert "give only one of schedule, every" in invalid["two"]
    assert "routine.name" in invalid["named"]


def test_the_readme_routine_example_is_a_valid_routine() -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = readme.split("## Routines and heartbeat", 1)[1]
    write("example", section.split("```toml", 1)[1].split("```", 1)[0])
    valid, invalid = load()
    assert invalid == {}
    assert valid["example"].timezone == "Europe/Paris"  # type: ignore[attr-defined]


def test_a_heartbeat_job_ticks_what_it_was_given_but_not_what_it_says_it_did_not_do(
    tmp_path: Path,
) -> None:
    from chorus.routines._heartbeat import heartbeat_prompt, items_done, tick_items

    path = tmp_path / "HEARTBEAT.md"
    path.write_text("# list\n- [ ] feed the cat\n- [ ] water the plants\n- [x] done before\n")
    prompt = heartbeat_prompt(path, ["feed the cat", "water the plants"])
    done = items_done(prompt, "Fed.\nNOT DONE: water the plants\n")
    assert done == ["feed the cat"]
    assert tick_items(path, done) == 1
    ticked = "# list\n- [x] feed the cat\n- [ ] water the plants\n- [x] done before\n"
    assert path.read_text() == ticked
    assert tick_items(path, ["an item that is not there"]) == 0


def test_a_heartbeat_file_that_is_a_link_is_never_written_through(tmp_path: Path) -> None:
    from chorus.routines._heartbeat import tick_items

    target = tmp_path / "elsewhere.md"
    target.write_text("- [ ] feed the cat\n")
    (tmp_path / "HEARTBEAT.md").symlink_to(target)
    assert tick_items(tmp_path / "HEARTBEAT.md", ["feed the cat"]) == 0
    assert target.read_text() == "- [ ] feed the cat\n"
