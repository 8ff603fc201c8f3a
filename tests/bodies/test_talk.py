"""Reading back a talk from a CLI's own transcript: the link-safe, bounded reader
(:mod:`chorus.bodies._talk`) against hostile files."""

from __future__ import annotations

import json
import os
from pathlib import Path

from chorus.bodies._talk import (
    LINE_CAP,
    MAX_EVENTS,
    TEXT_CAP,
    find_transcript,
    mark,
    read_since,
    split_lines,
    state_home,
    talk_events,
)
from chorus.events import MAX_EVENT_BYTES, Notice, Text

SID = "569cdbb4-5349-447b-9a36-160f39d0cc0f"


def _line(text: str, kind: str = "user") -> str:
    role = "user" if kind == "user" else "assistant"
    content = text if kind == "user" else [{"type": "text", "text": text}]
    return json.dumps({"type": kind, "message": {"role": role, "content": content}}) + "\n"


def _session_file(home: Path) -> Path:
    folder = home / ".claude" / "projects" / "-work"
    folder.mkdir(parents=True)
    return folder / f"{SID}.jsonl"


def test_only_what_the_talk_added_is_read(tmp_path: Path) -> None:
    path = _session_file(tmp_path)
    path.write_text(_line("before the talk"))
    start = mark("claude", {"HOME": str(tmp_path)}, SID)
    assert start is not None
    assert start.offset == path.stat().st_size
    with path.open("a") as f:
        f.write(_line("typed in the talk") + _line("the answer", "assistant") + '{"half')
    events = talk_events("claude", read_since(start, SID))
    assert [type(e) for e in events] == [Notice, Text]
    assert isinstance(events[0], Notice)
    assert (events[0].message, events[0].kind) == ("typed in the talk", "talk")


def test_a_link_to_a_file_outside_the_state_folder_reads_as_nothing(tmp_path: Path) -> None:
    secret = tmp_path / "secret.jsonl"
    secret.write_text(_line("a secret the model wants in the log") * 3)
    path = _session_file(tmp_path / "home")
    path.symlink_to(secret)
    start = mark("claude", {"HOME": str(tmp_path / "home")}, SID)
    assert start is not None
    assert start.offset == 0
    assert read_since(start, SID) == []


def test_a_linked_folder_on_the_way_reads_as_nothing(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / f"{SID}.jsonl").write_text(_line("planted"))
    projects = tmp_path / "home" / ".claude" / "projects"
    projects.mkdir(parents=True)
    (projects / "-work").symlink_to(elsewhere)
    start = mark("claude", {"HOME": str(tmp_path / "home")}, SID)
    assert start is not None
    assert read_since(start, SID) == []


def test_a_hard_link_reads_as_nothing(tmp_path: Path) -> None:
    other = tmp_path / "other.jsonl"
    other.write_text("")
    path = _session_file(tmp_path / "home")
    os.link(other, path)
    start = mark("claude", {"HOME": str(tmp_path / "home")}, SID)
    assert start is not None
    other.write_text(_line("through a hard link"))
    assert read_since(start, SID) == []


def test_a_bad_id_names_no_file(tmp_path: Path) -> None:
    _session_file(tmp_path).write_text(_line("x"))
    home = tmp_path / ".claude"
    assert find_transcript("claude", home, SID) is not None
    assert find_transcript("claude", home, "../../etc/passwd") is None
    assert find_transcript("claude", home, "*") is None


def test_long_lines_and_junk_are_skipped() -> None:
    data = b"x" * (LINE_CAP + 1) + b"\nnot json\n\xff\xfe\n" + _line("kept").encode() + b"partial"
    lines = split_lines(data)
    assert len(lines) == 3
    events = talk_events("claude", lines)
    assert [e.message for e in events if isinstance(e, Notice)] == ["kept"]


def test_state_folders_follow_the_cli_environment(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path)}
    assert state_home("claude", env) == tmp_path / ".claude"
    assert state_home("claude", {**env, "CLAUDE_CONFIG_DIR": "/c"}) == Path("/c")
    assert state_home("codex", {**env, "CODEX_HOME": "/x"}) == Path("/x")
    assert state_home("gemini", env) == tmp_path / ".gemini"
    assert state_home("acp", env) is None


def test_a_flood_is_bounded_in_count_and_size() -> None:
    huge = "y" * (TEXT_CAP * 3)
    lines = [_line(huge, "assistant").strip()] + [_line(f"p{i}").strip() for i in range(3000)]
    events = talk_events("claude", lines)
    assert len(events) == MAX_EVENTS + 1
    assert isinstance(events[0], Text)
    assert len(events[0].text) < TEXT_CAP + 100
    last = events[-1]
    assert isinstance(last, Notice)
    assert last.message == f"{3001 - MAX_EVENTS} more event(s) of the talk were left out"
    assert all(len(e.model_dump_json()) < MAX_EVENT_BYTES for e in events)
