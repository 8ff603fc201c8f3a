"""The everyday commands end to end through the daemon, with the real Claude Code CLI."""

from __future__ import annotations

import json
import os
import pty
import signal
import subprocess
import sys
import time
from typing import TYPE_CHECKING

import pytest

from chorus.client._lifecycle import read_pid
from chorus.daemon import is_responding
from chorus.testing import shell, slow_text, text, thinking
from tests._wait import until

if TYPE_CHECKING:
    from conftest import Chorus

pytestmark = pytest.mark.e2e


def test_piped_ask_prints_only_the_final_answer(shared_chorus: Chorus) -> None:
    chorus = shared_chorus
    chorus.server.script([shell("echo hi > out.txt"), text("The summary.")])
    result = chorus.run("ask", "summarize", "--body", "claude")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "The summary.\n"
    assert "queued" in result.stderr


def test_events_format_shows_each_thing_once(shared_chorus: Chorus) -> None:
    chorus = shared_chorus
    chorus.server.script([thinking("let me think", "the answer is 42")])
    result = chorus.run("ask", "think", "--body", "claude", "--format", "events")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert out.count("the answer is 42") == 1, out
    assert out.count("let me think") == 1, out
    assert "job succeeded" in out
    assert "=None" not in out


def test_watch_json_and_id_prefixes(chorus: Chorus) -> None:
    chorus.server.script([text("prefixed")])
    job_id = chorus.run("task", "one", "--body", "claude").stdout.strip()
    watched = chorus.run("watch", job_id[:8], "--json")
    assert watched.returncode == 0, watched.stderr
    events = [json.loads(line) for line in watched.stdout.splitlines()]
    assert events[-1]["type"] == "job_ended"
    assert all(e["job_id"] == job_id for e in events)
    logged = chorus.run("log", job_id[:6], "--json")
    assert [json.loads(x) for x in logged.stdout.splitlines()] == events
    listed = json.loads(chorus.run("jobs", "--json").stdout)
    assert [j["id"] for j in listed] == [job_id]
    table = chorus.run("jobs").stdout
    assert job_id[:8] in table
    assert job_id not in table


def test_steer_unknown_job_exits_2_and_writes_nothing(shared_chorus: Chorus) -> None:
    chorus = shared_chorus
    chorus.run("start")
    before = chorus.client.jobs()
    result = chorus.run("steer", "nosuchjob", "go left")
    assert result.returncode == 2
    assert "nosuchjob" in result.stderr or "steer" in result.stderr
    assert chorus.client.jobs() == before


def test_a_job_silent_longer_than_the_idle_limit_still_ends_well(
    chorus: Chorus, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The daemon's pings keep a quiet stream alive: no read timeout on ``ask``."""
    with (chorus.home / "config.toml").open("a") as f:
        f.write("")
    _set_ping(chorus, 0.3)
    monkeypatch.setenv("CHORUS_STREAM_IDLE_S", "3")  # a loaded machine delays pings
    chorus.server.script([slow_text("after the silence", chunks=1, delay=6.0)])
    result = chorus.run("ask", "think long", "--body", "claude")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "after the silence\n"


def test_a_silent_daemon_is_reported_lost(chorus: Chorus, monkeypatch: pytest.MonkeyPatch) -> None:
    _set_ping(chorus, 0.3)
    monkeypatch.setenv("CHORUS_STREAM_IDLE_S", "1.5")
    chorus.server.script([slow_text("slow " * 20, chunks=20, delay=0.5)])
    job_id = chorus.run("task", "long", "--body", "claude").stdout.strip()
    pid = read_pid()
    assert pid is not None
    watcher = chorus.popen("watch", job_id, "--format", "text")
    time.sleep(1.0)
    os.kill(pid, signal.SIGSTOP)
    try:
        _out, err = watcher.communicate(timeout=30)
    finally:
        os.kill(pid, signal.SIGCONT)
    assert watcher.returncode == 1
    assert "lost the daemon" in err
    assert chorus.run("watch", job_id).returncode == 0  # the job went on


def _set_ping(chorus: Chorus, seconds: float) -> None:
    path = chorus.home / "config.toml"
    text_ = path.read_text().replace(
        "notifications = false", f"notifications = false\nstream_ping_s = {seconds}"
    )
    path.write_text(text_)


def test_reading_never_starts_a_daemon(chorus: Chorus) -> None:
    chorus.server.script([text("kept")])
    job_id = chorus.run("task", "one", "--body", "claude").stdout.strip()
    assert chorus.run("watch", job_id).returncode == 0
    assert chorus.run("stop").returncode == 0
    for args in (("jobs",), ("jobs", "--json"), ("status",), ("log", job_id), ("sessions", "list")):
        result = chorus.run(*args)
        assert result.returncode == 0, (args, result.stderr)
        assert not is_responding(), args
    assert job_id[:8] in chorus.run("jobs").stdout  # read from the log itself
    offline = json.loads(chorus.run("status", "--json").stdout)
    assert (offline["daemon"], offline["source"]) == ("not running", "log")
    assert offline["jobs"] == {"succeeded": 1}
    assert "claude" in offline["router_bodies"]
    claude = [h for h in offline["health"] if h["key"].split("@")[0] == "claude"]
    assert claude
    assert claude[0]["outcomes"] == [True]  # the job's success, kept in the log
    table = chorus.run("status").stdout
    assert "read from the log" in table
    assert "claude: healthy" in table
    sessions = json.loads(chorus.run("sessions", "list", "--json").stdout)
    mirror = chorus.home / "sessions" / f"{sessions[0]['id']}.jsonl"
    started = [json.loads(line) for line in mirror.read_text().splitlines()]
    said = [e["model"] for e in started if e["type"] == "session_started"]
    assert said  # the model Claude said it runs, shown by sessions list
    assert sessions[0]["model"] == said[0]
    assert not is_responding()


def test_stop_says_what_is_left_and_can_cancel(chorus: Chorus) -> None:
    long = slow_text("long " * 40, chunks=40, delay=0.25)
    chorus.server.script([long, long])
    first = chorus.run("task", "long", "--body", "claude").stdout.strip()
    until(lambda: chorus.client.job(first)["state"] == "running")
    stopped = chorus.run("stop")
    assert "left unfinished" in stopped.stdout
    assert first[:12] in stopped.stdout
    chorus.run("start")
    until(lambda: chorus.client.job(first)["state"] == "running")
    cancelled = json.loads(chorus.run("stop", "--cancel-jobs", "--json").stdout)
    assert cancelled["cancelled"] == [first]
    assert cancelled["left"] == []
    stored = json.loads(chorus.run("jobs", "--json").stdout)  # no daemon: read from the log
    assert [(j["id"], j["state"]) for j in stored] == [(first, "cancelled")], stored


def test_status_names_every_body_and_the_gateway(chorus: Chorus) -> None:
    chorus.run("start")
    out = chorus.run("status").stdout
    assert "claude: healthy, no data yet" in out
    assert "gateway: ws://127.0.0.1:" in out
    assert "{" not in out
    data = json.loads(chorus.run("status", "--json").stdout)
    assert data["router_bodies"]
    assert data["gateway"]["tcp"]


def test_on_a_terminal_a_live_status_line_shows_then_clears(shared_chorus: Chorus) -> None:
    chorus = shared_chorus
    chorus.server.script([slow_text("streamed slowly", chunks=3, delay=1.2)])
    primary, terminal = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "chorus", "ask", "slowly", "--body", "claude"],
        stdin=subprocess.DEVNULL,
        stdout=terminal,
        stderr=subprocess.PIPE,
        cwd=chorus.work,
    )
    os.close(terminal)
    seen = b""
    while True:
        try:
            chunk = os.read(primary, 4096)
        except OSError:  # EIO: the other side closed
            break
        if not chunk:
            break
        seen += chunk
    os.close(primary)
    assert proc.wait(timeout=60) == 0
    assert proc.stderr is not None
    proc.stderr.close()
    out = seen.decode(errors="replace")
    assert "… " in out  # the status line: elapsed time first
    assert "\r\x1b[2K" in out  # and cleared again
    assert "streamed slowly" in out
    assert "job succeeded" in out


def test_steer_a_finished_job_by_prefix_queues_a_follow_up(shared_chorus: Chorus) -> None:
    chorus = shared_chorus
    chorus.server.script([text("first"), text("followed up"), text("again")])
    job_id = chorus.run("task", "one", "--body", "claude").stdout.strip()
    assert chorus.run("watch", job_id).returncode == 0
    answer = json.loads(chorus.run("steer", job_id[:9], "now say more", "--json").stdout)
    assert answer["job_id"] == job_id
    assert answer["how"] == "queued_followup"
    follow = answer["followup_job_id"]
    watched = chorus.run("watch", follow)
    assert watched.returncode == 0
    assert watched.stdout == "followed up\n"
    human = chorus.run("steer", job_id[:9], "and more")
    assert human.returncode == 0, human.stderr
    assert "queued as a follow-up as job" in human.stdout
