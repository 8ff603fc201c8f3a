"""Sessions that live, end to end through the daemon on the real CLIs:
a body stays warm across jobs, closes when idle and then resumes natively, a
gateway brain and a CLI job share one body, and steering reaches the model."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from chorus._errors import UserError
from chorus.client._paths import socket_path
from chorus.events import JobEnded, SessionStarted, Steer, ToolCall, TurnCompleted, parse_event
from chorus.gateway import UcpClient
from chorus.testing import ModelServer, shell, slow_text, text
from tests._wait import until

if TYPE_CHECKING:
    from conftest import Daemon

pytestmark = pytest.mark.e2e
BODIES = ("claude", "codex", "gemini")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _said(server: ModelServer, lane: str) -> str:
    return json.dumps([r.body for r in server.turn_requests(lane=lane)])


@pytest.mark.parametrize("body", BODIES)
def test_two_asks_in_one_session_share_one_process_and_its_history(
    shared_daemon: Daemon, body: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    chorus = shared_daemon
    chorus.server.script([text("the code word is heron"), text("it was heron")], lane=body)
    first = chorus.ask("remember the code word", "--body", body)
    pid = chorus.session_of(first)["transport"]["pgid"]
    assert _alive(pid)  # the body stays up between jobs
    _check_listed_model(chorus, first)
    second = chorus.ask("which word?", "--session", first[-1].session_id)
    assert isinstance(second[-1], JobEnded)
    assert second[-1].state == "succeeded"
    assert chorus.session_of(second)["transport"]["pgid"] == pid  # the same CLI process
    last = chorus.server.turn_requests(lane=body)[-1]
    assert "heron" in json.dumps(last.body)  # the second turn saw the first


def _check_listed_model(chorus: Daemon, events: list[Any]) -> None:
    """``sessions list`` (``--json`` and the table) shows the model the CLI said it runs
    (a spare body announced it before the job: the session's log has it)."""
    shown = chorus.run("sessions", "show", events[-1].session_id, "--json").stdout
    logged = [parse_event(json.dumps(e)) for e in json.loads(shown)["events"]]
    model = next(e.model for e in logged if isinstance(e, SessionStarted))
    assert model
    listed = json.loads(chorus.run("sessions", "list", "--json").stdout)
    assert {r["id"]: r["model"] for r in listed}[events[-1].session_id] == model
    table = chorus.run("sessions", "list").stdout  # COLUMNS=200: no cell wraps
    row = next(line for line in table.splitlines() if events[-1].session_id[:8] in line)
    assert model in row, table


def test_an_idle_body_is_closed_and_the_next_job_resumes_natively(
    daemon_with: Callable[..., Daemon],
) -> None:
    chorus = daemon_with("session_idle_timeout_s = 1")
    chorus.server.script([text("the code word is osprey"), text("it was osprey")], lane="claude")
    first = chorus.ask("remember the code word", "--body", "claude")
    record = chorus.session_of(first)
    pid = record["transport"]["pgid"]
    until(lambda: not _alive(pid), timeout=30)  # closed by the idle reaper
    second = chorus.ask("which word?", "--session", record["id"])
    assert second[-1].state == "succeeded"
    again = chorus.session_of(second)
    assert again["transport"]["pgid"] != pid  # a new process...
    assert again["native_session_id"] == record["native_session_id"]  # ...on the same session
    last = chorus.server.turn_requests(lane="claude")[-1]
    assert "osprey" in json.dumps(last.body)  # the history came back by native resume


def _job_events(chorus: Daemon, job_id: str) -> list[Any]:
    return list(chorus.client.events(job_id, follow=False))


@pytest.mark.parametrize("body", BODIES)
def test_a_steer_reaches_the_model_of_the_running_turn(shared_daemon: Daemon, body: str) -> None:
    chorus = shared_daemon
    chorus.server.script([shell("sleep 4"), text("steered fine"), text("spare")], lane=body)
    job_id = chorus.run("task", "count slowly", "--body", body).stdout.strip()
    until(lambda: any(isinstance(e, ToolCall) for e in _job_events(chorus, job_id)))
    answer = chorus.steer(job_id, "also mention the word kestrel")
    assert answer["how"] in ("native", "emulated")
    watched = chorus.run("watch", job_id)
    assert watched.returncode == 0, watched.stdout[-2000:]
    assert "kestrel" in _said(chorus.server, body)  # the model was asked with the steer
    steers = [e for e in _job_events(chorus, job_id) if isinstance(e, Steer)]
    assert [s.text for s in steers] == ["also mention the word kestrel"]
    assert steers[0].native == (answer["how"] == "native")


def test_a_steer_on_a_queued_job_joins_its_prompt(shared_daemon: Daemon) -> None:
    chorus = shared_daemon
    chorus.server.script(
        [slow_text("first " * 40, chunks=40, delay=0.25), text("ok")], lane="claude"
    )
    first = chorus.run("task", "one", "--body", "claude").stdout.strip()
    until(lambda: chorus.client.job(first)["session_id"] is not None)
    session = chorus.client.job(first)["session_id"]
    second = chorus.run("task", "two", "--session", session).stdout.strip()
    assert chorus.steer(second, "and say plover")["how"] == "added_to_prompt"
    assert chorus.run("watch", second).returncode == 0
    assert chorus.client.job(second)["prompt"] == "two\n\nand say plover"
    last = chorus.server.turn_requests(lane="claude")[-1]
    assert "and say plover" in (last.last_user_text() or "")
    assert any(isinstance(e, Steer) for e in _job_events(chorus, second))


def test_a_steer_on_a_finished_job_becomes_a_follow_up(shared_daemon: Daemon) -> None:
    chorus = shared_daemon
    chorus.server.script([text("done"), text("followed up")], lane="claude")
    events = chorus.ask("first", "--body", "claude")
    answer = chorus.steer(events[-1].job_id, "now say goodbye")
    assert answer["how"] == "queued_followup"
    follow = answer["followup_job_id"]
    assert chorus.run("watch", follow).returncode == 0
    job = chorus.client.job(follow)
    assert job["session_id"] == events[-1].session_id
    assert job["result"]["text"] == "followed up"


def test_a_steer_on_an_unknown_job_is_refused_and_writes_nothing(
    shared_daemon: Daemon,
) -> None:
    chorus = shared_daemon
    chorus.run("start")
    before = chorus.client.jobs()
    with pytest.raises(UserError, match="unknown job 'no-such-job'"):
        chorus.steer("no-such-job", "hello")
    assert chorus.client.jobs() == before


async def _brain_turn(cwd: Path) -> tuple[str, int]:
    async with UcpClient.connect(unix_socket=socket_path()) as brain:
        info = await brain.request("initialize", body="claude", cwd=str(cwd), timeout=90)
        await brain.send_user("remember the word lapwing")
        await brain.until(lambda e: isinstance(e, TurnCompleted), timeout=90)
        status = await brain.request("status")
    return str(info["session_id"]), int(status["pid"])


def test_a_brain_and_a_cli_job_share_one_session_and_one_process(
    shared_daemon: Daemon,
) -> None:
    chorus = shared_daemon
    chorus.server.script([text("noted: lapwing"), text("it was lapwing")], lane="claude")
    assert chorus.run("start").returncode == 0
    session_id, pid = asyncio.run(_brain_turn(chorus.work))
    events = chorus.ask("which word did the brain say?", "--session", session_id)
    assert events[-1].state == "succeeded"
    assert chorus.client.session(session_id)["transport"]["pgid"] == pid
    assert _alive(pid)
    last = chorus.server.turn_requests(lane="claude")[-1]
    assert "lapwing" in json.dumps(last.body)


async def _race(session_id: str, last_seq: int, chorus: Daemon) -> tuple[list[str], str]:
    """A brain sends two messages while a CLI job is submitted on the same session;
    returns every turn's result as the brain saw it, and the CLI job's."""
    async with UcpClient.connect(unix_socket=socket_path()) as brain:
        await brain.request("initialize", resume=session_id, last_seq=last_seq, timeout=90)
        job = asyncio.create_task(
            asyncio.to_thread(chorus.ask, "from the cli", "--session", session_id)
        )
        await brain.send_user("from the brain 1")
        await brain.send_user("from the brain 2")
        seen: list[str] = []
        while len(seen) < 3:
            batch = await brain.until(lambda e: isinstance(e, TurnCompleted), timeout=120)
            seen += [str(e.result) for e in batch if isinstance(e, TurnCompleted)]
        cli = await job
    return seen, str(cli[-1].result)


def test_a_brain_and_a_cli_job_racing_on_one_session_are_serialized(
    shared_daemon: Daemon,
) -> None:
    chorus = shared_daemon
    replies = [slow_text(f"reply {i}", chunks=4, delay=0.1) for i in range(3)]
    chorus.server.script([text("ready"), *replies], lane="claude")
    first = chorus.ask("get ready", "--body", "claude")
    session_id = first[-1].session_id
    pid = chorus.session_of(first)["transport"]["pgid"]
    seen, cli = asyncio.run(_race(session_id, first[-1].seq, chorus))
    assert sorted(seen) == ["reply 0", "reply 1", "reply 2"]  # three turns, one at a time
    assert cli in seen  # the CLI job got its own turn's answer
    assert chorus.client.session(session_id)["transport"]["pgid"] == pid  # one body
    stored = [e.seq for e in asyncio.run(_read(session_id))]
    assert stored == list(range(1, len(stored) + 1))


async def _read(session_id: str) -> list[Any]:
    from chorus.store import SqliteStore

    store = SqliteStore()
    await store.start()
    try:
        return await store.read_events(session_id)
    finally:
        await store.close()


def test_a_new_session_takes_the_spare_body_with_a_fresh_conversation(
    daemon_with: Callable[..., Daemon],
) -> None:
    chorus = daemon_with("spare_bodies = true")
    chorus.server.script([text("first session: grebe"), text("second session")], lane="claude")
    first = chorus.ask("say a bird", "--body", "claude")
    first_pid = chorus.session_of(first)["transport"]["pgid"]
    until(lambda: bool(chorus.client.status()["spare_bodies"]))
    spare = chorus.client.status()["spare_bodies"][0]
    assert spare["body"] == "claude"
    assert spare["pid"] != first_pid
    second = chorus.ask("hello again", "--body", "claude")  # a new session, same cwd
    assert second[-1].session_id != first[-1].session_id
    assert second[-1].state == "succeeded"
    assert chorus.session_of(second)["transport"]["pgid"] == spare["pid"]  # no boot paid
    last = chorus.server.turn_requests(lane="claude")[-1]
    assert "grebe" not in json.dumps(last.body)  # the spare carried no conversation
    assert any(e.type == "session_started" for e in second)  # its start is in the new log


def test_the_next_spare_starts_after_the_turn_that_took_the_last_one(
    daemon_with: Callable[..., Daemon],
) -> None:
    """A spare's start is a whole CLI booting: beside the turn of the session that just
    took the last spare, it would slow that turn down. While that turn's tool runs
    (3 s, far more than a boot), no new spare is made; once it ended, one is."""
    chorus = daemon_with("spare_bodies = true")
    script = [text("first"), shell("sleep 3"), text("second"), text("memory: none")]
    chorus.server.script(script, lane="claude")
    chorus.ask("one", "--body", "claude")
    until(lambda: bool(chorus.client.status()["spare_bodies"]))
    job_id = chorus.run("task", "two", "--body", "claude").stdout.strip()
    until(lambda: any(isinstance(e, ToolCall) for e in _job_events(chorus, job_id)))
    while chorus.client.job(job_id)["state"] in ("queued", "running"):
        still = chorus.client.job(job_id)["state"] == "running"
        assert not (still and chorus.client.status()["spare_bodies"]), "a spare beside the turn"
    assert chorus.client.job(job_id)["state"] == "succeeded"
    until(lambda: bool(chorus.client.status()["spare_bodies"]))
