"""Faults that must not lose a job, with the real Claude Code CLI."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from chorus.daemon import stop_daemon
from chorus.events import JobEnded, parse_event
from chorus.testing import slow_text, text
from tests.faults import start_faulty_daemon

if TYPE_CHECKING:
    from conftest import Chorus, TinyDisk

pytestmark = [pytest.mark.e2e, pytest.mark.faults]


def test_a_daemon_killed_as_a_job_ends_leaves_a_job_whose_watch_ends(chorus: Chorus) -> None:
    chorus.server.script([text("finished just in time")])
    proc = start_faulty_daemon("kill-after-job-end", chorus.home / "faulty.log")
    job_id = chorus.run("task", "finish", "--body", "claude").stdout.strip()
    assert proc.wait(timeout=90) == -signal.SIGKILL  # killed right after the job's end
    # A fresh daemon starts with the watch; the job's end must be in the log.
    watched = chorus.run("watch", job_id, timeout=60)
    assert watched.returncode == 0, watched.stdout + watched.stderr
    assert "finished just in time" in watched.stdout
    job = chorus.client.job(job_id)
    assert job["state"] == "succeeded"
    events = list(chorus.client.events(job_id, follow=False))
    assert [type(e) for e in events].count(JobEnded) == 1
    # The mirror holds exactly the log, down to its last event.
    mirror = chorus.home / "sessions" / f"{job['session_id']}.jsonl"
    seqs = [parse_event(line).seq for line in mirror.read_text().splitlines()]
    session = chorus.client.session(job["session_id"])
    assert seqs == list(range(1, session["last_seq"] + 1))


def test_a_full_disk_mid_job_fails_it_as_storage_full_once_space_is_back(
    chorus: Chorus, tiny_disk: TinyDisk, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tiny_disk.path / "home"
    home.mkdir()
    shutil.copy(chorus.home / "config.toml", home / "config.toml")
    monkeypatch.setenv("CHORUS_HOME", str(home))  # the log, the store and daemon.log
    chorus.server.script([slow_text("streaming onto a full disk ", chunks=30, delay=0.25)])
    try:
        job_id = chorus.run("task", "write a lot", "--body", "claude").stdout.strip()
        chorus.server.wait_for(lambda reqs: any(r.kind == "turn" for r in reqs), timeout=60)
        time.sleep(1.0)
        tiny_disk.fill()
        # The turn ends meanwhile (its last chunk sent, then a moment for the CLI to
        # take it); nothing more can be stored.
        ended = lambda reqs: any(r.kind == "turn" and r.finished for r in reqs)  # noqa: E731
        chorus.server.wait_for(ended, timeout=60)
        time.sleep(2.0)
        # The body's output file shares the disk: its lost output ends the
        # body, and the job may fail (storage_full) before space is back.
        assert chorus.client.job(job_id)["state"] in ("running", "failed")
        tiny_disk.free()
        watched = chorus.run("watch", job_id, timeout=180)
        assert watched.returncode == 1, watched.stdout + watched.stderr
        job = chorus.client.job(job_id)
        assert job["state"] == "failed"
        assert job["error"]["code"] == "storage_full"
        ended = list(chorus.client.events(job_id, follow=False))[-1]
        assert isinstance(ended, JobEnded)
        assert ended.error is not None
        assert ended.error.code == "storage_full"
        # Said to the person (daemon.log shares the full disk: its lines may be lost).
        assert "disk full" in job["error"]["message"]
    finally:
        stop_daemon()


def test_a_cli_that_exits_at_once_fails_the_job_as_body_crashed(
    chorus_home: Path, tmp_path: Path
) -> None:
    # A fault the real CLIs cannot show on demand: a broken install that dies at start.
    fake = tmp_path / "broken-claude"
    fake.write_text('#!/bin/sh\necho "boom: cannot start" >&2\nexit 3\n')
    fake.chmod(0o755)
    chorus_home.mkdir()
    (chorus_home / "config.toml").write_text(
        "[daemon]\nnotifications = false\n[gateway]\ntcp = false\n"
        f'[agents.claude]\ncommand = "{fake}"\n'
    )
    try:
        done = subprocess.run(
            [sys.executable, "-m", "chorus", "ask", "hi", "--body", "claude", "--json"],
            capture_output=True,
            text=True,
            timeout=90,
            cwd=tmp_path,
        )
        assert done.returncode == 1, done.stderr
        ended = parse_event(done.stdout.splitlines()[-1])
        assert isinstance(ended, JobEnded)
        assert ended.error is not None
        assert ended.error.code == "body_crashed", ended.error.message
    finally:
        stop_daemon()
