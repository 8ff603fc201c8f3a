"""Thinking frameworks across vendors, end to end through the daemon on
the three real CLIs: consensus plans in parallel read-only and one body executes
the arbiter's pick; reflect has another vendor review and the first revise."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

from chorus._errors import UserError
from chorus.events import Notice
from chorus.testing import shell, text

if TYPE_CHECKING:
    from conftest import Daemon

pytestmark = pytest.mark.e2e

PLAN_YES = '{"summary": "write the file", "steps": ["write chosen.txt with yes", "check it"]}'
PLAN_SAME = '{"summary": "same idea", "steps": ["write chosen.txt with yes", "report back"]}'
# Shares one step with claude's plan, so claude's is the one the others share most.
PLAN_ODD = '{"summary": "odd", "steps": ["delete the repository", "check it"]}'


def _notes(chorus: Daemon, job_id: str, kind: str) -> list[str]:
    events = chorus.client.events(job_id, follow=False)
    return [e.message for e in events if isinstance(e, Notice) and e.kind == kind]


def _children(chorus: Daemon, parent: str) -> list[dict[str, Any]]:
    return [j for j in chorus.client.jobs() if j["options"].get("parent_job") == parent]


def _ask_framework(chorus: Daemon, prompt: str, **fields: Any) -> dict[str, Any]:
    """Submit through the daemon API (as ``chorus ask --framework``), watch it end."""
    assert chorus.run("start").returncode == 0  # in a child: no Popen of ours outlives it
    job = chorus.client.submit(prompt=prompt, cwd=str(chorus.work), **fields)
    watched = chorus.run("watch", job["id"])
    assert watched.returncode == 0, watched.stdout[-2000:]
    return dict(chorus.client.job(job["id"]))


def test_consensus_plans_on_three_vendors_and_one_body_executes(shared_daemon: Daemon) -> None:
    chorus = shared_daemon
    server = chorus.server
    server.script([text(PLAN_YES), shell("echo yes > chosen.txt"), text("done")], lane="claude")
    server.script([text(PLAN_SAME)], lane="codex")
    server.script([text(PLAN_ODD)], lane="gemini")
    job = _ask_framework(
        chorus, "decide how to write chosen.txt", body="claude", framework="consensus"
    )
    assert job["state"] == "succeeded"
    assert (chorus.work / "chosen.txt").read_text() == "yes\n"  # the chosen plan was executed
    for lane in ("claude", "codex", "gemini"):  # three planning requests, one per vendor
        first = server.turn_requests(lane=lane)[0]
        assert "You are one of several planners" in json.dumps(first.body)
    children = _children(chorus, job["id"])
    assert sorted(c["body"] for c in children) == ["claude", "codex", "gemini"]
    assert {c["options"]["permission_mode"] for c in children} == {"plan"}  # read-only
    assert all(c["state"] == "succeeded" for c in children)
    done = _notes(chorus, job["id"], "framework")
    assert len([n for n in done if n.startswith("planner ")]) == 3  # time (and cost) each
    assert all("s" in n.split("(job ")[1] for n in done if n.startswith("planner "))
    arbiter = _notes(chorus, job["id"], "arbiter")
    assert len(arbiter) == 1
    assert arbiter[0].startswith("arbiter chose claude's plan")
    executed = server.turn_requests(lane="claude")[1]
    assert "write chosen.txt with yes" in json.dumps(executed.body)  # the plan went along
    # ... and is the last section of the executing body's context.
    context = json.dumps(executed.body["system"])
    plan_at = context.index("## Plan of the active job")
    assert context.index("Chosen plan (from claude): write the file", plan_at) > plan_at
    assert all(context.index(title) < plan_at for title in ("## Identity", "## Now"))
    assert "## " not in context[plan_at + 2 :]


def test_reflect_has_another_vendor_review_and_the_first_revise(shared_daemon: Daemon) -> None:
    chorus = shared_daemon
    server = chorus.server
    server.script(
        [shell("echo draft > notes.txt"), text("wrote notes.txt"), text("fixed: added a title")],
        lane="claude",
    )
    review = '{"ok": false, "findings": ["notes.txt has no title line"]}'
    server.script([text(review)], lane="codex")
    job = _ask_framework(
        chorus, "write notes.txt", body="claude", framework="reflect", reviewer="codex"
    )
    assert job["state"] == "succeeded"
    assert job["result"]["text"] == "fixed: added a title"
    asked = server.turn_requests(lane="codex")[0]
    assert "Review another model's work" in json.dumps(asked.body)
    revision = server.turn_requests(lane="claude")[-1]
    assert "notes.txt has no title line" in json.dumps(revision.body)  # the revision saw it
    notes = _notes(chorus, job["id"], "review")
    assert len(notes) == 1
    assert "no title line" in notes[0]


def test_an_unknown_framework_or_planner_is_refused_and_writes_nothing(
    shared_daemon: Daemon,
) -> None:
    chorus = shared_daemon
    chorus.run("start")
    before = chorus.client.jobs()
    with pytest.raises(UserError, match="unknown framework 'vote'"):
        chorus.client.submit(prompt="x", body="claude", framework="vote")
    with pytest.raises(UserError, match="unknown body 'eliza'"):
        chorus.client.submit(prompt="x", body="claude", framework="consensus", planners=["eliza"])
    assert chorus.client.jobs() == before


def _second_opinion_home(chorus: Daemon, voter: str | None) -> None:
    """A policy that lets elevated risk through (advisory), so only a vote can stop it."""
    (chorus.home / "policy.toml").write_text('version = 1\n[risk]\nauthority = "advisory"\n')
    if voter is not None:
        config = chorus.home / "config.toml"
        config.write_text(config.read_text() + f'[brain]\nsecond_opinion = "{voter}"\n')
    (chorus.work / "build").mkdir()


@pytest.mark.parametrize("voter", [None, "codex"])
def test_a_second_opinion_denies_a_risky_call_the_policy_allowed(
    daemon_with: Callable[..., Daemon], voter: str | None
) -> None:
    from chorus.policy import AuditLog

    chorus = daemon_with()
    _second_opinion_home(chorus, voter)
    chorus.server.script([shell("rm -rf build"), text("finished")], lane="claude")
    chorus.server.script([text('{"vote": "deny", "reason": "it deletes a folder"}')], lane="codex")
    job = _ask_framework(chorus, "clean the build folder", body="claude")
    assert job["state"] == "succeeded"
    votes = [e.data for e in AuditLog().entries() if e.kind == "second_opinion"]
    if voter is None:  # the control: the policy alone lets it run
        assert not (chorus.work / "build").exists()
        assert votes == []
        return
    assert (chorus.work / "build").is_dir()  # the vote denied it; it never ran
    assert [(v["vote"], v["voter"], v["policy"]) for v in votes] == [("deny", "codex", "allow")]
    asked = chorus.server.turn_requests(lane="codex")[0]
    assert "rm -rf build" in json.dumps(asked.body)
    told = chorus.server.turn_requests(lane="claude")[-1]
    assert "it deletes a folder" in json.dumps(told.body)  # the model learned why
