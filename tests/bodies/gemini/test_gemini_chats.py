"""Gemini's chat file of the current minute is moved aside before a ``session/load``
(the load would reset it); everything else is left as it is."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from chorus.bodies.gemini._chats import gemini_state, spare_this_minute

SESSION = "ff885f35-b472-42e6-8883-cde6c51f93d1"
NOW = datetime(2026, 11, 27, 1, 2, 39, tzinfo=UTC)


def _chat(state: Path, minute: str, project: str = "work") -> Path:
    chats = state / "tmp" / project / "chats"
    chats.mkdir(parents=True, exist_ok=True)
    path = chats / f"session-2026-11-27T{minute}-{SESSION[:8]}.jsonl"
    path.write_text(f'{{"sessionId":"{SESSION}"}}\n')
    return path


def test_the_current_minutes_file_takes_the_previous_minutes_name(tmp_path: Path) -> None:
    stored = _chat(tmp_path, "01-02")
    moved = spare_this_minute(tmp_path, SESSION, NOW)
    assert moved == [stored.with_name(f"session-2026-11-27T01-01-{SESSION[:8]}.jsonl")]
    assert not stored.exists()
    assert SESSION in moved[0].read_text()


def test_a_file_of_an_earlier_minute_is_left_alone(tmp_path: Path) -> None:
    stored = _chat(tmp_path, "00-58")
    assert spare_this_minute(tmp_path, SESSION, NOW) == []
    assert stored.exists()


def test_a_taken_name_or_a_link_is_left_alone(tmp_path: Path) -> None:
    stored = _chat(tmp_path, "01-02")
    taken = _chat(tmp_path, "01-01")
    linked = _chat(tmp_path, "01-01", project="other")
    (linked.parent / stored.name).symlink_to(linked)
    assert spare_this_minute(tmp_path, SESSION, NOW) == []
    assert stored.exists() and taken.exists()


def test_a_project_folder_that_is_a_link_is_not_followed(tmp_path: Path) -> None:
    outside = _chat(tmp_path / "elsewhere", "01-02")
    (tmp_path / "state" / "tmp").mkdir(parents=True)
    (tmp_path / "state" / "tmp" / "work").symlink_to(outside.parent.parent)
    assert spare_this_minute(tmp_path / "state", SESSION, NOW) == []
    assert outside.exists()


def test_the_state_folder_follows_gemini_cli_home_then_home() -> None:
    assert gemini_state({"GEMINI_CLI_HOME": "/g", "HOME": "/h"}) == Path("/g/.gemini")
    assert gemini_state({"HOME": "/h"}) == Path("/h/.gemini")
    assert gemini_state({}) is None
