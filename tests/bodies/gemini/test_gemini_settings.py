"""The settings.json check both Gemini bodies run at start."""

from __future__ import annotations

import json
from pathlib import Path

from chorus.bodies.gemini import RECOMMENDED_SETTINGS, settings_path, settings_problems
from chorus.testing import gemini_settings


def _write(home: Path, data: object) -> dict[str, str]:
    (home / ".gemini").mkdir(parents=True)
    (home / ".gemini" / "settings.json").write_text(json.dumps(data))
    return {"HOME": str(home)}


def test_recommended_and_test_settings_pass(tmp_path: Path) -> None:
    assert settings_problems(_write(tmp_path / "a", RECOMMENDED_SETTINGS)) == []
    assert settings_problems(_write(tmp_path / "b", gemini_settings(max_attempts=1))) == []


def test_gemini_cli_home_wins_over_home(tmp_path: Path) -> None:
    env = {"HOME": "/nowhere", "GEMINI_CLI_HOME": str(tmp_path)}
    assert settings_path(env) == tmp_path / ".gemini" / "settings.json"
    assert settings_path({}) is None
    assert "neither" in settings_problems({})[0]


def test_each_missing_setting_is_named(tmp_path: Path) -> None:
    problems = settings_problems(_write(tmp_path, {"general": {"maxAttempts": 10}}))
    assert len(problems) == 3
    assert "selectedType" in problems[0]
    assert "folder trust" in problems[1]
    assert "maxAttempts is 10" in problems[2]


def test_unreadable_settings(tmp_path: Path) -> None:
    assert "does not exist" in settings_problems({"HOME": str(tmp_path)})[0]
    (tmp_path / ".gemini").mkdir()
    (tmp_path / ".gemini" / "settings.json").write_text("{not json")
    assert "unreadable" in settings_problems({"HOME": str(tmp_path)})[0]
    (tmp_path / ".gemini" / "settings.json").write_text("[]")
    assert "not a JSON object" in settings_problems({"HOME": str(tmp_path)})[0]
