"""Teams end to end through the daemon on the real CLIs (scripted model):
a claude member and a codex member work at the same time on their assignments,
write their files and post their results; the coordinator's synthesis gets both;
``team status`` shows each member; a message dropped by ``mv`` reaches its member."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from chorus.client._lifecycle import read_pid
from chorus.events import Notice
from chorus.testing import shell, slow_text, text, tool_call
from tests._procs import ended
from tests._wait import until

if TYPE_CHECKING:
    from conftest import Daemon

pytestmark = pytest.mark.e2e

#: How often a check that runs the CLI asks while a turn streams (it must see the turn
#: running before the stream ends): the CLI's own run is most of the wait.
RACING = 0.2
SEC = "SECURITY-RESULT: no secret in the repository"
PERF = "PERF-RESULT: the loop in app.py is quadratic"


def _json(chorus: Daemon, *args: str) -> Any:
    done = chorus.run(*args, "--json")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return json.loads(done.stdout)


def _states(chorus: Daemon) -> dict[str, str]:
    status = _json(chorus, "team", "status", "audit")
    return {m["name"]: m["state"] for m in status["members"]}


def _popen(chorus: Daemon, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "chorus", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=chorus.work,
    )


def _drop(chorus: Daemon, member: str, name: str, content: str, tmp: Path) -> Path:
    """Write the file elsewhere, then ``mv`` it in (the atomic way to drop one)."""
    source = tmp / name
    source.write_text(content)
    inbox = chorus.home / "teams" / "audit" / "inboxes" / member
    subprocess.run(["mv", str(source), str(inbox / name)], check=True)
    return inbox


def test_a_claude_and_a_codex_member_work_at_once_and_the_coordinator_merges(
    daemon_with: Callable[..., Daemon], tmp_path: Path
) -> None:
    chorus = daemon_with("max_parallel_jobs = 4")
    server = chorus.server
    server.script(
        [
            shell("sleep 3; echo checked > security.md"),
            text(SEC),
            shell("cat security.md perf.md > report.md"),
            text("REPORT written to report.md"),
        ],
        lane="claude",
    )
    server.script([shell("sleep 3; echo measured > perf.md"), text(PERF)], lane="codex")
    created = _json(
        chorus,
        "team", "create", "audit", "--member", "security=claude:security review",
        "--member", "perf=codex:performance", "--coordinator", "claude", "--persistent",
    )  # fmt: skip
    assert sorted(created["members"]) == ["perf", "security"]
    assert _states(chorus) == {"coordinator": "idle", "perf": "idle", "security": "idle"}

    # a message dropped into perf's folder by `mv` is picked up by the watcher
    _drop(chorus, "perf", "note.json", json.dumps({"text": "look at app.py first"}), tmp_path)
    inbox = _drop(chorus, "perf", "bad.json", "{not json", tmp_path)
    until(lambda: len(chorus.client.call("GET", "/teams/audit/messages?member=perf")) == 1)
    assert len(_json(chorus, "team", "messages", "audit", "perf")) == 1
    until(lambda: (inbox / "rejected" / "bad.json.reason").exists())
    assert "not valid JSON" in (inbox / "rejected" / "bad.json.reason").read_text()
    assert not (inbox / "note.json").exists()

    run = _popen(
        chorus,
        "team", "run", "audit", "audit the project, write report.md",
        "--cwd", str(chorus.work),
        "--assign", "security=look for leaked secrets",
        "--assign", "perf=find the slow loop",
    )  # fmt: skip
    # both members run at the same time, as `team status` shows
    until(lambda: _states_of(chorus, "audit") | {"coordinator": "-"} == {
        "coordinator": "-", "perf": "running", "security": "running"
    }, interval=RACING)  # fmt: skip
    out, err = run.communicate(timeout=240)
    assert run.returncode == 0, out[-2000:] + err[-3000:]
    assert "REPORT written to report.md" in out

    status = _json(chorus, "team", "status", "audit")
    members = {m["name"]: m for m in status["members"]}
    assert members["security"]["state"] == "succeeded"
    assert members["perf"]["state"] == "succeeded"
    assert status["run"]["state"] == "done"
    jobs = {m: chorus.client.job(status["run"]["jobs"][m][0]) for m in ("security", "perf")}
    assert jobs["security"]["body"] == "claude"
    assert jobs["perf"]["body"] == "codex"
    starts = [j["started_at"] for j in jobs.values()]
    ends = [j["ended_at"] for j in jobs.values()]
    assert max(starts) < min(ends), "the members did not run at the same time"

    # files written by each member, then the coordinator's report from both
    assert (chorus.work / "security.md").read_text() == "checked\n"
    assert (chorus.work / "perf.md").read_text() == "measured\n"
    assert (chorus.work / "report.md").read_text() == "checked\nmeasured\n"

    # each member got its assignment; perf also got the dropped message
    sec_first = json.dumps(server.turn_requests(lane="claude")[0].body)
    perf_first = json.dumps(server.turn_requests(lane="codex")[0].body)
    assert "look for leaked secrets" in sec_first
    assert "find the slow loop" in perf_first
    assert "look at app.py first" in perf_first
    # the synthesis turn carried both results, posted as `result` messages
    synthesis = json.dumps(server.turn_requests(lane="claude")[2].body)
    assert SEC in synthesis
    assert PERF in synthesis
    results = _json(chorus, "team", "messages", "audit", "coordinator")
    assert {(m["sender"], m["kind"], m["state"]) for m in results} == {
        ("security", "result", "acked"),
        ("perf", "result", "acked"),
    }
    perf_msgs = _json(chorus, "team", "messages", "audit", "perf")
    assert {m["state"] for m in perf_msgs} == {"acked"}
    assert len(perf_msgs) == 2
    view = chorus.home / "teams" / "audit" / "inboxes" / "coordinator.jsonl"
    assert len(view.read_text().splitlines()) == 2

    done = chorus.run("team", "teardown", "audit")
    assert done.returncode == 0, done.stderr
    assert chorus.run("team", "status", "audit").returncode == 2


PLAN = json.dumps(
    {
        "assignments": [
            {"member": "security", "task": "SPLIT-A: scan for secrets"},
            {"member": "perf", "task": "SPLIT-B: profile the loop"},
            {"member": "ghost", "task": "SPLIT-C: anything"},
        ]
    }
)


def test_the_coordinator_splits_the_task_and_a_missing_body_does_not_stop_the_rest(
    daemon_with: Callable[..., Daemon],
) -> None:
    chorus = daemon_with(
        "max_parallel_jobs = 4",
        "[agents.ghost]",
        'protocol = "acp"',
        'command = "/nonexistent/ghost-agent"',
    )
    server = chorus.server
    server.script(
        [text(f"Here is the plan:\n{PLAN}"), text(SEC), text("FINAL-ANSWER")], lane="claude"
    )
    server.script([text(PERF)], lane="gemini")
    created = chorus.run(
        "team", "create", "split", "--member", "security=claude", "--member", "perf=gemini",
        "--member", "ghost=ghost",
    )  # fmt: skip
    assert created.returncode == 0, created.stderr
    done = chorus.run("team", "run", "split", "audit everything", "--cwd", str(chorus.work))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert done.stdout.strip() == "FINAL-ANSWER"

    claude = [json.dumps(r.body) for r in server.turn_requests(lane="claude")]
    assert "Split the task below between its members" in claude[0]
    assert "SPLIT-A: scan for secrets" in claude[1]
    assert "SPLIT-B: profile the loop" in json.dumps(server.turn_requests(lane="gemini")[0].body)
    assert SEC in claude[2]
    assert PERF in claude[2]
    assert "member ghost could not run" in claude[2]  # the missing body is reported, not fatal
    # ephemeral: the team is torn down once its task ended; its inbox views stay
    assert chorus.run("team", "status", "split").returncode == 2
    view = chorus.home / "teams" / "split" / "inboxes" / "coordinator.jsonl"
    assert len(view.read_text().splitlines()) == 3


def test_a_member_uses_the_team_tools_as_itself(shared_daemon: Daemon) -> None:
    chorus = shared_daemon
    server = chorus.server
    server.script(
        [
            tool_call("mcp__chorus__team_status", {}),
            tool_call("mcp__chorus__team_send", {"to": "coordinator", "text": "NOTE-FOR-COORD"}),
            tool_call("mcp__chorus__team_send", {"to": "ghost", "text": "x"}),
            tool_call("mcp__chorus__team_inbox", {}),
            text("SOLO-DONE"),
            text("SYNTHESIS"),
        ],
        lane="claude",
    )
    assert chorus.run("team", "create", "tools", "--member", "solo=claude").returncode == 0
    done = chorus.run(
        "team", "run", "tools", "work", "--cwd", str(chorus.work), "--assign", "solo=do it"
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    turns = server.turn_requests(lane="claude")
    results = [t.last_tool_result() for t in turns[1:5]]
    assert all(r is not None for r in results)
    status, sent, refused, inbox = (str(r.content) if r else "" for r in results)
    assert '"name": "solo"' in status
    assert '"state": "running"' in status
    assert '"how": "waiting' in sent
    assert "no member 'ghost'" in refused  # an unknown recipient: an error, no new inbox
    assert inbox.strip().endswith("[]")
    synthesis = json.dumps(turns[-1].body)
    assert "NOTE-FOR-COORD" in synthesis
    assert "SOLO-DONE" in synthesis


def test_teardown_refuses_while_a_member_runs_and_force_stops_it_by_steps(
    shared_daemon: Daemon,
) -> None:
    chorus = shared_daemon
    chorus.server.script(
        [slow_text("still going " * 40, chunks=240, delay=0.25), text("never")], lane="claude"
    )
    assert chorus.run("team", "create", "long", "--member", "busy=claude").returncode == 0
    run = _popen(
        chorus, "team", "run", "long", "x", "--cwd", str(chorus.work), "--assign", "busy=wait"
    )
    until(lambda: _states_of(chorus, "long").get("busy") == "running", interval=RACING)
    until(lambda: len(chorus.server.turn_requests(lane="claude")) >= 1)

    steered = chorus.run("steer", "--team", "long", "--member", "busy", "STEER-TEXT", "--json")
    assert steered.returncode == 0, steered.stderr
    assert json.loads(steered.stdout)["how"].startswith("steered into the running turn")
    assert chorus.run("steer", "--team", "long", "--member", "ghost", "x").returncode == 2

    refused = chorus.run("team", "teardown", "long")
    assert refused.returncode == 2
    assert "members running: busy" in refused.stderr
    assert (chorus.home / "teams" / "long" / "config.toml").exists()  # nothing changed

    forced = chorus.run("team", "teardown", "long", "--force", "--json", timeout=120)
    assert forced.returncode == 0, forced.stderr
    steps = json.loads(forced.stdout)["stopped"]["busy"]
    assert steps[0] == "shutdown_request"
    run.communicate(timeout=60)
    assert run.returncode == 1  # the run was stopped
    job = next(j for j in chorus.client.jobs() if j["options"].get("member") == "busy")
    assert job["state"] == "cancelled"
    events = chorus.client.events(job["id"], follow=False)
    notes = [e.message for e in events if isinstance(e, Notice) and e.kind == "team"]
    assert notes[0].startswith("team shutdown: shutdown_request")
    assert notes[-1].startswith("team shutdown: the member stopped after")
    assert chorus.run("team", "status", "long").returncode == 2


def _states_of(chorus: Daemon, team: str) -> dict[str, str]:
    """The members' states as ``team status --json`` shows them, asked of the daemon's
    API (polled often: a CLI start each time would cost half a second of CPU)."""
    status = chorus.client.call("GET", f"/teams/{team}")
    return {m["name"]: m["state"] for m in status["members"]}


def test_a_daemon_killed_mid_turn_loses_no_message_and_posts_the_result_once(
    daemon_with: Callable[..., Daemon],
) -> None:
    chorus = daemon_with()
    said = "finished by the same CLI " * 4
    chorus.server.script(
        [slow_text(said, chunks=40, delay=0.25), text("RE-RUN: must not happen")],
        lane="claude",
    )
    assert chorus.run("team", "create", "crash", "--member", "m=claude").returncode == 0
    run = _popen(
        chorus, "team", "run", "crash", "x", "--cwd", str(chorus.work), "--assign", "m=survive"
    )
    until(lambda: _states_of(chorus, "crash").get("m") == "running", interval=RACING)
    until(lambda: len(chorus.server.turn_requests(lane="claude")) >= 1)
    [task] = _json(chorus, "team", "messages", "crash", "m")
    assert task["state"] == "delivered"
    pid = read_pid()
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    run.communicate(timeout=60)  # the run's driver died with the daemon
    until(lambda: ended(pid), 10)  # its threads too: they hold its socket
    assert chorus.run("start").returncode == 0
    until(lambda: _states_of(chorus, "crash").get("m") == "succeeded", timeout=120)
    [task] = _json(chorus, "team", "messages", "crash", "m")
    assert task["state"] == "acked"  # carried by the re-attached turn, acked at its end
    # The restarted daemon re-attached to the running CLI: the turn was not
    # run again, and its one result was posted once.
    assert len(chorus.server.turn_requests(lane="claude")) == 1
    results = _json(chorus, "team", "messages", "crash", "coordinator")
    assert [(r["sender"], r["kind"], r["body"]["text"]) for r in results] == [("m", "result", said)]
    run_state = _json(chorus, "team", "status", "crash")["run"]
    assert run_state["state"] == "failed"
    assert "daemon stopped during the run" in run_state["error"]


#: 60 characters in 60 pieces, 0.25 s apart: a 15 s turn, time for ``team send`` to
#: start while it runs on a loaded machine.
FIRST_PART = "first part done " + "and more " * 5


def test_a_message_for_a_busy_member_that_cannot_steer_waits_for_its_turn_boundary(
    shared_daemon: Daemon,
) -> None:
    chorus = shared_daemon
    server = chorus.server
    server.script(
        [slow_text(FIRST_PART, chunks=60, delay=0.25), text("LATE-NOTE-HANDLED")],
        lane="gemini",
    )
    server.script([text("SYNTH")], lane="claude")
    assert chorus.run("team", "create", "gem", "--member", "g=gemini").returncode == 0
    run = _popen(
        chorus, "team", "run", "gem", "x", "--cwd", str(chorus.work), "--assign", "g=part one"
    )
    until(lambda: _states_of(chorus, "gem").get("g") == "running", interval=RACING)
    until(lambda: len(server.turn_requests(lane="gemini")) >= 1)
    sent = _json(chorus, "team", "send", "gem", "g", "LATE-NOTE")
    assert sent["how"].startswith("waiting: delivered at the end of the member's turn")
    out, err = run.communicate(timeout=240)
    assert run.returncode == 0, out[-2000:] + err[-3000:]
    gemini = [json.dumps(r.body) for r in server.turn_requests(lane="gemini")]
    assert "LATE-NOTE" not in gemini[0]
    assert "LATE-NOTE" in gemini[1]  # the next turn, started at the boundary, carried it
    synthesis = json.dumps(server.turn_requests(lane="claude")[-1].body)
    assert "first part done" in synthesis
    assert "LATE-NOTE-HANDLED" in synthesis
