"""A permission ask that waits for a person (an approval), end to end on the real
Claude CLI: the job's stream has a ``flag`` event with the id and the command
that answers it, ``chorus jobs`` says ``waiting``, ``chorus status`` lists the
pending flag, and ``chorus approve`` lets the tool run."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from chorus.testing import shell, text
from tests.dashboard.conftest import DashDaemon, until

pytestmark = pytest.mark.e2e


def _approvals(dash: DashDaemon, job_id: str) -> list[dict[str, Any]]:
    lines = dash.daemon.event_lines(job_id, follow=False)
    events = [json.loads(line) for line in lines]
    return [e for e in events if e["type"] == "flag" and e["name"] == "approval"]


def test_a_waiting_tool_says_which_flag_and_how_to_answer_it(
    dash_with: Callable[..., DashDaemon],
) -> None:
    dash = dash_with()
    dash.server.script([shell("git push origin main"), text("pushed"), text("spare")])
    job_id = dash.run("task", "publish it", "--body", "claude").stdout.strip()
    until(lambda: bool(_approvals(dash, job_id)))
    event = _approvals(dash, job_id)[0]
    flag_id = event["flag_id"]
    assert "git push origin main" in event["text"]
    assert f"chorus approve {job_id[:12]} {flag_id}" in event["answer_hint"]
    rows = json.loads(dash.run("jobs", "--json").stdout)
    assert [(r["id"], r["state"], r["status"]) for r in rows] == [(job_id, "running", "waiting")]
    assert "waiting" in dash.run("jobs").stdout
    status = json.loads(dash.run("status", "--json").stdout)
    assert status["pending_flags"] == [flag_id]
    assert f"pending flags: {flag_id}" in dash.run("status").stdout
    board = json.loads(dash.run("flags", "--json").stdout)
    assert [(b["id"], b["kind"], b["job_id"]) for b in board] == [(flag_id, "approval", job_id)]
    approved = dash.run("approve", job_id[:8], flag_id)
    assert approved.returncode == 0, approved.stderr
    watched = dash.run("watch", job_id, "--format", "events")
    assert watched.returncode == 0, watched.stdout[-2000:]
    assert f"flag {flag_id} approval" in watched.stdout  # the human line names the flag...
    assert "chorus approve" in watched.stdout  # ...and how to answer it
    assert dash.daemon.job(job_id)["result"]["text"] == "pushed"
    assert json.loads(dash.run("status", "--json").stdout)["pending_flags"] == []
