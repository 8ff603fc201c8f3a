"""``[budget]`` on the real Claude CLI: once today's spend reaches
``daily_usd`` the next job stops before its body spends anything, with the stable
code ``budget_exceeded``; ``status`` shows today's spend; ``daemon.log`` has a JSON
line per transition."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

from chorus.events import JobEnded, Notice, parse_event
from chorus.testing import text

if TYPE_CHECKING:
    from conftest import Chorus

pytestmark = pytest.mark.e2e


def test_a_job_over_the_daily_budget_stops_with_budget_exceeded(chorus: Chorus) -> None:
    config = chorus.home / "config.toml"
    config.write_text(config.read_text() + "[budget]\ndaily_usd = 0.0005\n")
    chorus.server.script([text("first"), text("never")])
    first = chorus.run("ask", "hello", "--body", "claude")
    assert first.returncode == 0, first.stderr
    assert first.stdout == "first\n"
    requests = len(chorus.server.turn_requests())

    second = chorus.run("ask", "hello again", "--body", "claude", "--json")
    assert second.returncode == 1
    events = [parse_event(line) for line in second.stdout.splitlines()]
    ended = events[-1]
    assert isinstance(ended, JobEnded)
    assert ended.error is not None
    assert ended.error.code == "budget_exceeded"
    assert "daily_usd" in ended.error.message
    assert [e.kind for e in events if isinstance(e, Notice)] == ["budget"]
    assert len(chorus.server.turn_requests()) == requests  # nothing more was spent

    status = json.loads(chorus.run("status", "--json").stdout)
    assert status["spend_today"]["usd"] > 0.0005
    assert status["budget"]["daily_usd"] == 0.0005
    assert status["next_routine"]["name"] == "heartbeat"  # on by default, every 30m
    human = chorus.run("status").stdout
    spent = f"${status['spend_today']['usd']:.4f}"  # the meter's price of the requests
    assert f"spend today: {spent} of $0.0005 (daily_usd) (claude {spent})" in human

    lines = (chorus.home / "run" / "daemon.log").read_text().splitlines()
    structured = [json.loads(line) for line in lines if line.startswith("{")]
    kinds = [(s["event"], s.get("state") or s.get("kind")) for s in structured]
    assert ("routed", None) in kinds
    assert ("session_started", None) in kinds
    assert ("job_ended", "succeeded") in kinds
    assert ("job_ended", "failed") in kinds
    assert ("notice", "budget") in kinds
