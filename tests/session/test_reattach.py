"""Re-attaching bodies at the session layer, without CLIs: which bodies run detached, what the
stored snapshot holds, and what counts as handed out by the codec."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from chorus.bodies import BodyHandle, BodyOptions
from chorus.config import ChorusConfig
from chorus.events import Notice, PermissionDecision, TextDelta, TurnCompleted
from chorus.session._reattach import (
    HANDLE_KEY,
    Snapshot,
    bodies_dir,
    counted,
    detached_options,
    snapshot_of,
)
from chorus.store import SessionRecord


@pytest.fixture(autouse=True)
def _home(chorus_home: Path) -> Path:
    return chorus_home


@pytest.mark.parametrize(
    ("body", "detached"),
    [("claude", True), ("codex", True), ("gemini", True), ("claude-print", False)],
)
def test_only_long_lived_bodies_of_stored_sessions_run_detached(body: str, detached: bool) -> None:
    options = BodyOptions(cwd=Path("/"))
    made = detached_options(options, body, "s1", ChorusConfig())
    assert (made.run_dir == bodies_dir() / "s1") is detached
    assert detached_options(options, body, None, ChorusConfig()).run_dir is None  # a spare


def test_a_body_no_registry_knows_stays_attached() -> None:
    options = BodyOptions(cwd=Path("/"))
    assert detached_options(options, "fake-for-a-test", "s1", ChorusConfig()) is options


def _record(transport: dict[str, object]) -> SessionRecord:
    return SessionRecord("s1", "claude", "active", 0.0, 0.0, transport=transport)


def test_a_snapshot_round_trips_through_the_stored_transport(tmp_path: Path) -> None:
    snap = Snapshot(BodyHandle(tmp_path, os.getpid(), None, offset=120, skip=2), seq=41)
    back = snapshot_of(_record({HANDLE_KEY: snap.as_dict()}))
    assert back == snap
    assert snapshot_of(_record({})) is None
    assert snapshot_of(_record({HANDLE_KEY: {"pid": "x"}})) is None  # malformed: ignored


def test_a_snapshot_is_alive_only_for_the_very_process(tmp_path: Path) -> None:
    stat = Path("/proc/self/stat").read_text()
    started = int(stat.rsplit(")", 1)[1].split()[19])
    mine = Snapshot(BodyHandle(tmp_path, os.getpid(), started), seq=0)
    assert mine.alive
    assert not Snapshot(BodyHandle(tmp_path, os.getpid(), started + 1), seq=0).alive  # reused
    assert not Snapshot(BodyHandle(tmp_path, os.getpid(), None), seq=0).alive


def test_codec_events_count_and_chorus_made_ones_do_not() -> None:
    assert counted(TextDelta(text="x"))
    assert counted(TurnCompleted(result="done"))
    assert not counted(Notice(message="m", kind="recovery"))
    assert not counted(PermissionDecision(request_id="r", decision="allow"))
