"""Flags without blocking, end to end on the real Claude CLI: a scripted ``flag``
tool call through Chorus's MCP server, the job going on at once, the decision
reaching the running job as a steer (or an ended one as a follow-up), a second
decision refused, and a deadline kept across a daemon ``kill -9``."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable
from typing import Any

import pytest

from chorus.client._paths import pid_path
from chorus.testing import ModelServer, shell, text, tool_call
from tests.dashboard.conftest import DashDaemon, until

pytestmark = pytest.mark.e2e

QUESTION = "Archive or delete the old logs?"
FLAG_CALL = tool_call(
    "mcp__chorus__flag",
    {"question": QUESTION, "options": ["archive", "delete"], "default": "archive"},
)


def _flags(dash: DashDaemon, *args: str) -> list[dict[str, Any]]:
    done = dash.run("flags", "--json", *args)
    assert done.returncode == 0, done.stderr
    rows: list[dict[str, Any]] = json.loads(done.stdout)
    return rows


def _events(dash: DashDaemon, job_id: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in dash.daemon.event_lines(job_id, follow=False)]


def _said(server: ModelServer) -> str:
    return json.dumps([r.body for r in server.turn_requests()])


def test_a_flag_lets_the_job_go_on_and_an_overruling_decision_steers_it(
    dash_with: Callable[..., DashDaemon],
) -> None:
    dash = dash_with()
    dash.server.script([FLAG_CALL, shell("sleep 12"), text("archived, then deleted"), text("ok")])
    job_id = dash.run("task", "tidy the logs", "--body", "claude").stdout.strip()
    until(lambda: len(_flags(dash)) == 1)
    flag = _flags(dash)[0]
    assert (flag["kind"], flag["job_id"], flag["default"]) == ("flag", job_id, "archive")
    assert flag["options"] == ["archive", "delete"]
    assert flag["question"] == QUESTION
    # The tool answered at once: go on with the default.
    result = dash.server.turn_requests()[1].last_tool_result()
    assert result is not None
    assert json.loads(result.content)["proceed_with"] == "archive"
    assert dash.daemon.job(job_id)["state"] == "running"
    # Decide by prefixes, as people type them.
    done = dash.run("approve", job_id[:8], flag["id"][:7], "--option", "delete", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["choice"] == "delete"
    watched = dash.run("watch", job_id)
    assert watched.returncode == 0, watched.stdout[-2000:]
    kinds = [(e["type"], e.get("how") or e.get("name")) for e in _events(dash, job_id)]
    assert "the person chose 'delete'" in _said(dash.server), str(kinds)  # the model was told
    flags = [e for e in _events(dash, job_id) if e["type"] == "flag"]
    assert [(f["name"], f["flag_id"], f["choice"]) for f in flags] == [
        ("raised", flag["id"], None),
        ("approved", flag["id"], "delete"),
    ]
    assert "chorus approve" in flags[0]["answer_hint"]
    decided = _flags(dash, "--all")[0]
    assert (decided["status"], decided["decided_by"]) == ("approved", "cli")
    again = dash.run("reject", job_id, flag["id"], "changed my mind")
    assert again.returncode == 2
    assert "already decided" in again.stderr
    assert _flags(dash, "--all")[0]["status"] == "approved"  # nothing changed


def test_a_rejection_after_the_job_ended_becomes_a_follow_up(
    dash_with: Callable[..., DashDaemon],
) -> None:
    dash = dash_with()
    dash.server.script([FLAG_CALL, text("archived them"), text("deleted them instead")])
    done = dash.run("ask", "tidy the logs", "--body", "claude", "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    job_id = json.loads(done.stdout.splitlines()[-1])["job_id"]
    flag = _flags(dash)[0]
    rejected = dash.run("reject", job_id, flag["id"], "we keep nothing", "--option", "delete")
    assert rejected.returncode == 0, rejected.stderr
    until(lambda: len(dash.daemon.jobs()) == 2)
    follow = next(j for j in dash.daemon.jobs() if j["id"] != job_id)
    assert follow["session_id"] == dash.daemon.job(job_id)["session_id"]
    assert dash.run("watch", follow["id"]).returncode == 0
    said = dash.server.turn_requests()[-1].last_user_text() or ""
    assert "the person rejected that (we keep nothing)" in said
    assert "'delete' instead" in said
    assert dash.daemon.job(follow["id"])["result"]["text"] == "deleted them instead"


def test_a_flag_deadline_survives_a_daemon_kill_9(dash_with: Callable[..., DashDaemon]) -> None:
    # Long enough to kill the daemon before it under load (the CLI's polls are slow).
    dash = dash_with("[flags]", 'flag_timeout = "15s"')
    dash.server.script([FLAG_CALL, shell("sleep 30"), *(text("went on") for _ in range(4))])
    job_id = dash.run("task", "tidy the logs", "--body", "claude").stdout.strip()
    until(lambda: len(_flags(dash)) == 1)
    os.kill(int(pid_path().read_text()), signal.SIGKILL)
    flag = _flags(dash)[0]
    assert flag["deadline_at"] > time.time()  # killed before its deadline
    time.sleep(flag["deadline_at"] - time.time() + 0.5)
    # Nothing settled it while the daemon was dead: still pending on disk...
    assert _flag(dash, flag["id"])["status"] == "pending"
    # ...and the next daemon settles it with the default at its first tick.
    dash.login_url()  # `chorus dashboard` starts a daemon
    until(lambda: _flag(dash, flag["id"])["status"] == "timed_out", timeout=30)
    settled = _flag(dash, flag["id"])
    assert (settled["choice"], settled["decided_by"]) == ("archive", "timeout")
    late = dash.run("approve", flag["id"], "--option", "delete")
    assert late.returncode == 2
    assert "already decided" in late.stderr
    named = [(e["name"], e["flag_id"]) for e in _events(dash, job_id) if e["type"] == "flag"]
    assert ("timed_out", flag["id"]) in named
    assert named.index(("raised", flag["id"])) < named.index(("timed_out", flag["id"]))


def _flag(dash: DashDaemon, flag_id: str) -> dict[str, Any]:
    return next(f for f in _flags(dash, "--all") if f["id"] == flag_id)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
