"""a mode a body cannot honour is downgraded with a notice the user sees.

claude-print (the real Claude CLI in print mode, scripted model) cannot ask Chorus
about a tool call; bypassPermissions would need its dangerous flag, which the
default policy does not allow, so it runs in acceptEdits. The notice is the job's
own event: ``chorus ask --json`` prints it, and plain ``chorus ask`` writes it to
stderr as one line (stdout keeps only the answer)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest

from chorus.testing import text

if TYPE_CHECKING:
    from conftest import Daemon

pytestmark = pytest.mark.e2e

DOWNGRADE = "using acceptEdits"


def _policy_notices(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == "notice" and e.get("kind") == "policy"]


def test_ask_json_shows_the_downgrade_notice_as_the_jobs_event(
    shared_daemon: Daemon,
) -> None:
    chorus = shared_daemon
    chorus.server.script([text("hello")], lane="claude")
    done = chorus.run(
        "ask", "hi", "--body", "claude-print", "--permission-mode", "bypassPermissions", "--json"
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    events = [json.loads(line) for line in done.stdout.splitlines()]
    ended = events[-1]
    assert (ended["type"], ended["state"]) == ("job_ended", "succeeded")
    notices = _policy_notices(events)
    assert len(notices) == 1, [e["type"] for e in events]
    assert DOWNGRADE in notices[0]["message"]
    assert "claude-print" in notices[0]["message"]
    assert notices[0]["job_id"] == ended["job_id"]


def test_plain_ask_prints_the_notice_on_stderr_once(
    shared_daemon: Daemon,
) -> None:
    chorus = shared_daemon
    chorus.server.script([text("plain answer")], lane="claude")
    done = chorus.run(
        "ask", "hi", "--body", "claude-print", "--permission-mode", "bypassPermissions"
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert done.stdout.strip() == "plain answer"
    lines = [ln for ln in done.stderr.splitlines() if DOWNGRADE in ln]
    assert len(lines) == 1, done.stderr
    assert "claude-print" in lines[0]


def test_each_job_of_a_continued_session_gets_its_own_notice(
    shared_daemon: Daemon,
) -> None:
    """The second job on the same session runs downgraded too, and says so."""
    chorus = shared_daemon
    chorus.server.script([text("one"), text("two")], lane="claude")
    mode = ("--body", "claude-print", "--permission-mode", "bypassPermissions", "--json")
    first = [json.loads(line) for line in chorus.run("ask", "one", *mode).stdout.splitlines()]
    session = first[-1]["session_id"]
    done = chorus.run("ask", "two", "--session", session, *mode)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    second = [json.loads(line) for line in done.stdout.splitlines()]
    assert second[-1]["session_id"] == session
    notices = _policy_notices(second)
    assert [n["job_id"] for n in notices] == [second[-1]["job_id"]]
    assert _policy_notices(first)[0]["job_id"] == first[-1]["job_id"]


def test_a_mode_the_body_honours_brings_no_notice(
    shared_daemon: Daemon,
) -> None:
    """The control: acceptEdits is what claude-print can do, so nothing is said."""
    chorus = shared_daemon
    chorus.server.script([text("fine")], lane="claude")
    done = chorus.run(
        "ask", "hi", "--body", "claude-print", "--permission-mode", "acceptEdits", "--json"
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    events = [json.loads(line) for line in done.stdout.splitlines()]
    assert events[-1]["state"] == "succeeded"
    assert _policy_notices(events) == []
