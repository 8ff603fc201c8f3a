"""``chorus log SESSION``: a session's events grouped job by job and talk by talk."""

from __future__ import annotations

from typing import Any

import pytest

from chorus.cli._log import blocks, print_session


def _event(seq: int, **fields: Any) -> dict[str, Any]:
    return {"seq": seq, "type": "text", "text": f"t{seq}", "job_id": None, **fields}


def test_a_session_reads_as_blocks_of_jobs_and_talks_in_seq_order() -> None:
    events = [
        _event(1, job_id="j1"),
        _event(2, job_id="j1"),
        _event(3, origin="talk", turn_id="talk-a", type="notice", kind="talk", message="hi"),
        _event(4, origin="talk", turn_id="talk-a"),
        _event(5, origin="talk", turn_id="talk-b"),  # the next talk, right after
        _event(6),  # the session's own (no job, no talk)
        _event(7, job_id="j2"),
    ]
    grouped = [(block, [e["seq"] for e in members]) for block, members in blocks(events)]
    assert grouped == [
        (("job", "j1"), [1, 2]),
        (("talk", "talk-a"), [3, 4]),
        (("talk", "talk-b"), [5]),
        (("session", ""), [6]),
        (("job", "j2"), [7]),
    ]


def test_no_events_make_no_blocks() -> None:
    assert list(blocks([])) == []


def test_a_talk_prints_as_a_header_and_what_the_person_typed(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    events = [
        _event(1, job_id="j1", text="first answer"),
        _event(2, origin="talk", turn_id="talk-a", type="notice", kind="talk", message="ping"),
        _event(3, origin="talk", turn_id="talk-a", text="PONG"),
    ]
    monkeypatch.setattr("chorus.cli._log.session_events", lambda raw: events)
    print_session("s1", as_json=False)
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "── job j1"
    assert out[2] == "── talk talk-a: 1 turn(s) typed in the agent's own CLI"
    assert out[3].split() == ["2", "you", "ping"]
    assert out[4].split() == ["3", "assistant", "PONG"]
