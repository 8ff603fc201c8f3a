"""Routines end to end: the real ``chorus`` CLI and daemon, the real Claude Code CLI
against the scripted model server."""

from __future__ import annotations

import json
import os
import signal
import time
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from chorus.client._lifecycle import read_pid
from chorus.policy import SENSITIVE_PATHS
from chorus.testing import error, shell, slow_text, text
from tests._procs import ended
from tests._wait import until

if TYPE_CHECKING:
    from conftest import Chorus

pytestmark = pytest.mark.e2e


def _json(chorus: Chorus, *args: str) -> Any:
    result = chorus.run(*args, "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    return json.loads(result.stdout)


def _routine_file(chorus: Chorus, name: str, body: str) -> Path:
    path = chorus.work / f"{name}.toml"
    path.write_text(f'[routine]\nmodel_preference = "claude"\n{body}')
    return path


def _fired(chorus: Chorus, name: str) -> list[dict[str, Any]]:
    """The routine's firings, asked of the daemon's API (the tests read them through
    the CLI once they are there)."""
    return list(chorus.client.call("GET", f"/routines/{name}/history"))


def _done(chorus: Chorus, job_id: str) -> bool:
    return str(chorus.client.job(job_id)["state"]) in ("succeeded", "failed", "cancelled")


def test_routine_run_queues_a_job_that_completes_and_shows_in_history(
    shared_chorus: Chorus,
) -> None:
    chorus = shared_chorus
    chorus.server.script([shell("echo from-routine > routine-out.txt"), text("routine done")])
    out = chorus.work / "out"
    out.mkdir()
    spec = _routine_file(
        chorus,
        "nightly",
        f'trigger = "manual"\ncwd = "{out}"\n[routine.task]\nprompt = "write the file"\n',
    )
    created = chorus.run("routine", "create", "--file", str(spec))
    assert created.returncode == 0, created.stderr
    assert (chorus.home / "routines" / "nightly.toml").read_text() == spec.read_text()
    run = chorus.run("routine", "run", "nightly")
    assert run.returncode == 0, run.stderr
    job_id = run.stdout.strip()
    until(lambda: _done(chorus, job_id))
    job = chorus.client.job(job_id)
    assert job["state"] == "succeeded"
    assert job["options"]["routine"] == "nightly"
    assert (out / "routine-out.txt").read_text() == "from-routine\n"
    (firing,) = _json(chorus, "routine", "history", "nightly")
    assert (firing["kind"], firing["job_id"], firing["job_state"]) == (
        "manual",
        job_id,
        "succeeded",
    )
    (row,) = [r for r in _json(chorus, "routine", "list") if r["name"] == "nightly"]
    assert (row["valid"], row["trigger"], row["failing"]) == (True, "manual", 0)
    assert row["last"]["job_state"] == "succeeded"


def test_bad_routine_file_exits_2_names_file_and_key_and_writes_nothing(
    shared_chorus: Chorus,
) -> None:
    chorus = shared_chorus
    spec = _routine_file(
        chorus,
        "broken",
        'schedule = "0 25 * * *"\ntimezone = "Europe/Paris"\n[routine.task]\nprompt = "p"\n',
    )
    result = chorus.run("routine", "create", "--file", str(spec))
    assert result.returncode == 2
    message = " ".join(result.stderr.split())
    assert "broken.toml" in message
    assert "routine.schedule" in message
    assert not (chorus.home / "routines" / "broken.toml").exists()


def test_an_invalid_routine_is_listed_as_invalid_beside_a_valid_one(shared_chorus: Chorus) -> None:
    chorus = shared_chorus
    routines = chorus.home / "routines"
    routines.mkdir(parents=True, exist_ok=True)
    (routines / "tz.toml").write_text(
        '[routine]\nschedule = "0 9 * * *"\ntimezone = "Nowhere/Land"\n'
        '[routine.task]\nprompt = "p"\n'
    )
    (routines / "fine.toml").write_text('[routine]\nevery = "1h"\n[routine.task]\nprompt = "p"\n')
    rows = {r["name"]: r for r in _json(chorus, "routine", "list")}
    assert rows["tz"]["valid"] is False
    assert "routine.timezone" in rows["tz"]["error"]
    assert rows["fine"]["valid"] is True
    assert rows["fine"]["next_fire"] > time.time()
    shown = chorus.run("routine", "list")
    assert "invalid" in shown.stdout


def test_a_burst_of_file_writes_fires_one_run_after_the_debounce(chorus: Chorus) -> None:
    chorus.server.script([text("noted the changes")])
    watched = chorus.work / "watched"
    (watched / ".git").mkdir(parents=True)
    spec = _routine_file(
        chorus,
        "onchange",
        f'trigger = "file_change"\nwatch_path = "{watched}"\ndebounce = "1500ms"\n'
        '[routine.task]\nprompt = "files changed:\\n{trigger_path}"\n',
    )
    assert chorus.run("routine", "create", "--file", str(spec)).returncode == 0
    assert chorus.run("start").returncode == 0
    time.sleep(3)  # the first tick starts the watcher
    started = time.monotonic()
    for i in range(6):
        (watched / f"note-{i % 3}.md").write_text(f"version {i}\n")
        (watched / ".git" / "index").write_text(f"noise {i}\n")
        time.sleep(0.2)
    until(lambda: bool(_fired(chorus, "onchange")), timeout=30)
    # fired only after the quiet period: the last of the six writes is 5 x 0.2 s in
    assert time.monotonic() - started >= 1.0 + 1.5
    time.sleep(4)  # nothing more comes of the same burst
    (firing,) = _json(chorus, "routine", "history", "onchange")
    paths = firing["detail"]["paths"]
    assert sorted(Path(p).name for p in paths) == ["note-0.md", "note-1.md", "note-2.md"]
    until(lambda: _done(chorus, firing["job_id"]))
    job = chorus.client.job(firing["job_id"])
    assert job["state"] == "succeeded"
    assert str(watched / "note-2.md") in job["prompt"]
    # changes under .git alone do not fire
    (watched / ".git" / "HEAD").write_text("ref: refs/heads/other\n")
    time.sleep(3)
    assert len(_json(chorus, "routine", "history", "onchange")) == 1


def _heartbeat(chorus: Chorus) -> Path:
    with (chorus.home / "config.toml").open("a") as config:
        config.write('[routines]\nheartbeat_body = "claude"\n')
    path = chorus.home / "workspace" / "HEARTBEAT.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def test_heartbeat_makes_no_model_request_when_everything_is_checked(chorus: Chorus) -> None:
    _heartbeat(chorus).write_text("# Heartbeat\n- [x] check the backups\n- [x] read mail\n")
    fired = _json(chorus, "heartbeat", "run")
    assert (fired["outcome"], fired["job"]) == ("nothing_to_do", None)
    assert chorus.client.jobs() == []
    time.sleep(1)
    assert chorus.server.requests == []


def _policy_with_open_workspace(home: Path) -> None:
    """The default policy denies all of CHORUS_HOME, workspace included, so a heartbeat
    job could not tick HEARTBEAT.md (reported to the lead). Deny the sensitive parts
    of CHORUS_HOME one by one instead, and leave workspace/ to the jobs."""
    sensitive = [p for p in SENSITIVE_PATHS if p != "{chorus_home}"]
    private = ["policy.toml", "config.toml", "chorus.db", "audit", "secrets", "run", "routines"]
    denied = sensitive + [f"{{chorus_home}}/{name}" for name in private]
    policy = home / "policy.toml"
    policy.write_text(f"version = 1\n[filesystem]\ndenied_paths = {json.dumps(denied)}\n")
    policy.chmod(0o600)  # a policy others could rewrite is refused


def test_heartbeat_runs_one_job_and_the_daemon_ticks_what_it_did(chorus: Chorus) -> None:
    _policy_with_open_workspace(chorus.home)  # the sandbox still keeps the file read-only
    path = _heartbeat(chorus)
    path.write_text(
        "# Heartbeat\n- [x] check the backups\n- [ ] water the plants\n- [ ] call the bank\n"
    )
    chorus.server.script(
        [
            shell("sed -i 's/- \\[ \\] call the bank/- [x] call the bank/' HEARTBEAT.md"),
            text("Watered them.\nNOT DONE: call the bank"),
        ]
    )
    fired = _json(chorus, "heartbeat", "run")
    assert fired["outcome"] == "queued"
    job_id = fired["job"]["id"]
    until(lambda: _done(chorus, job_id))
    assert chorus.client.job(job_id)["state"] == "succeeded", chorus.client.job(job_id)["error"]
    result = chorus.server.turn_requests()[1].last_tool_result()
    assert result is not None
    assert result.is_error or "Read-only" in result.content  # the body could not tick it
    assert path.read_text() == (
        "# Heartbeat\n- [x] check the backups\n- [x] water the plants\n- [ ] call the bank\n"
    )
    assert len(chorus.server.turn_requests()) == 2  # the tool call, then the answer
    assert "water the plants" in json.dumps(chorus.server.turn_requests()[0].body)
    assert [j["id"] for j in chorus.client.jobs()] == [job_id]


def test_daemon_killed_right_after_a_firing_never_fires_it_again(chorus: Chorus) -> None:
    chorus.server.script([text("once"), text("once more")])
    at = datetime.fromtimestamp(time.time() + 4).astimezone()
    spec = _routine_file(
        chorus,
        "oneshot",
        f'at = "{at.isoformat(timespec="seconds")}"\n[routine.task]\nprompt = "one shot"\n',
    )
    assert chorus.run("routine", "create", "--file", str(spec)).returncode == 0
    assert chorus.run("start").returncode == 0
    # Asked often (of the API: a CLI start takes longer): the kill must come right
    # after the firing.
    until(lambda: bool(_fired(chorus, "oneshot")), timeout=30)
    pid = read_pid()
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    until(lambda: ended(pid), 10)  # its threads too: they hold its socket
    assert chorus.run("start").returncode == 0
    assert read_pid() != pid
    time.sleep(5)  # a few ticks of the new daemon
    (firing,) = _json(chorus, "routine", "history", "oneshot")
    jobs = [j for j in chorus.client.jobs() if j["options"].get("routine") == "oneshot"]
    assert [j["id"] for j in jobs] == [firing["job_id"]]
    until(lambda: _done(chorus, firing["job_id"]))
    assert chorus.client.job(firing["job_id"])["state"] == "succeeded"


def test_daemon_down_over_a_firing_catches_up_exactly_once(chorus: Chorus) -> None:
    chorus.server.script([text("caught up")])
    at = datetime.fromtimestamp(time.time() + 6).astimezone()
    spec = _routine_file(
        chorus,
        "missed",
        f'at = "{at.isoformat(timespec="seconds")}"\n[routine.task]\nprompt = "late"\n',
    )
    assert chorus.run("routine", "create", "--file", str(spec)).returncode == 0
    assert chorus.run("start").returncode == 0
    until(lambda: any(r["name"] == "missed" for r in chorus.client.call("GET", "/routines")))
    pid = read_pid()
    assert pid is not None
    os.kill(pid, signal.SIGKILL)  # down before the firing time ...
    time.sleep(max(0.0, at.timestamp() - time.time()) + 2)
    assert chorus.run("start").returncode == 0  # ... and back after it
    until(lambda: bool(_fired(chorus, "missed")), timeout=30)
    time.sleep(4)
    (firing,) = _json(chorus, "routine", "history", "missed")
    assert firing["outcome"] == "queued"  # run_latest_once, inside the grace window
    until(lambda: _done(chorus, firing["job_id"]))
    assert chorus.client.job(firing["job_id"])["state"] == "succeeded"


def test_a_job_failing_on_an_overloaded_api_is_retried_and_completes(chorus: Chorus) -> None:
    with (chorus.home / "config.toml").open("a") as config:
        config.write("[retry]\nbase_s = 10.0\nmax_retries = 2\n")
    chorus.server.script([error("overloaded"), text("second time lucky")])
    job_id = chorus.run("task", "flaky upstream", "--body", "claude").stdout.strip()
    until(lambda: chorus.client.job(job_id)["state"] == "failed")
    # the outcome hook runs just after the job is marked failed
    until(lambda: chorus.client.status()["pending_retries"] == 1, timeout=5)
    status = chorus.run("status")
    assert "pending retries: 1" in status.stdout, status.stdout
    until(lambda: chorus.client.job(job_id)["state"] == "succeeded")
    job = chorus.client.job(job_id)
    assert job["attempts"] == 2
    assert job["result"] == {"text": "second time lucky"}
    assert _json(chorus, "status")["pending_retries"] == 0


def test_enable_disable_history_and_rm_from_the_cli(shared_chorus: Chorus) -> None:
    chorus = shared_chorus
    spec = _routine_file(chorus, "hourly", 'every = "1h"\n[routine.task]\nprompt = "p"\n')
    assert chorus.run("routine", "create", "--file", str(spec)).returncode == 0
    assert _json(chorus, "routine", "disable", "hourly") == {"name": "hourly", "enabled": False}
    (row,) = [r for r in _json(chorus, "routine", "list") if r["name"] == "hourly"]
    assert row["enabled"] is False
    assert "routine hourly enabled" in chorus.run("routine", "enable", "hourly").stdout
    assert _json(chorus, "routine", "history", "hourly") == []
    removed = chorus.run("routine", "rm", "hourly")
    assert removed.returncode == 0, removed.stderr
    assert not (chorus.home / "routines" / "hourly.toml").exists()
    assert all(r["name"] != "hourly" for r in _json(chorus, "routine", "list"))
    unknown = chorus.run("routine", "history", "hourly")
    assert unknown.returncode == 2
    assert "no routine named 'hourly'" in unknown.stderr
    assert chorus.run("routine", "run", "nope").returncode == 2


def test_a_routine_job_over_its_timeout_is_interrupted(shared_chorus: Chorus) -> None:
    chorus = shared_chorus
    chorus.server.script([slow_text("this takes far too long " * 10, chunks=60, delay=0.5)])
    spec = _routine_file(
        chorus,
        "bounded",
        'trigger = "manual"\ntimeout = "4s"\n[routine.task]\nprompt = "slow"\n',
    )
    assert chorus.run("routine", "create", "--file", str(spec)).returncode == 0
    job_id = chorus.run("routine", "run", "bounded").stdout.strip()
    until(lambda: _done(chorus, job_id), timeout=45)
    job = chorus.client.job(job_id)
    assert job["state"] == "cancelled"
    assert job["ended_at"] - job["started_at"] < 20  # the model would stream for 30 s
