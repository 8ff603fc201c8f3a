"""Gemini's chat file of the current minute is moved aside before a ``session/load``
(the load would reset it); everything else is left as it is."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from chorus.bodies.gemini._chats import (
    chat_files,
    drop_load_stubs,
    gemini_state,
    spare_this_minute,
)

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
    assert all(f.exists() for f in (stored, taken))


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


HEADER = f'{{"sessionId":"{SESSION}","projectHash":"x","kind":"main"}}\n'
CONTEXT = (
    '{"$set":{"messages":[{"id":"c","type":"user",'
    '"content":[{"text":"<session_context>\\nThis is Gemini.\\n</session_context>"}]}]}}\n'
)
PROMPT = '{"id":"u1","type":"user","content":[{"text":"first prompt"}]}\n'


def test_a_load_s_empty_file_is_dropped_and_the_conversation_kept(tmp_path: Path) -> None:
    loaded = _chat(tmp_path, "01-01")
    loaded.write_text(HEADER + CONTEXT + PROMPT)
    older_stub = _chat(tmp_path, "00-30")  # there before the load: not the load's
    older_stub.write_text(HEADER + CONTEXT)
    before = chat_files(tmp_path, SESSION)
    stub = _chat(tmp_path, "01-02")
    stub.write_text(HEADER + CONTEXT)
    talked = _chat(tmp_path, "01-03")
    talked.write_text(HEADER + CONTEXT + PROMPT)
    assert drop_load_stubs(tmp_path, SESSION, before) == [stub]
    assert all(f.exists() for f in (loaded, older_stub, talked))
