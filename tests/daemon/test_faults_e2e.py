"""Faults that must not lose a job, with the real Claude Code CLI (issue 18)."""

from __future__ import annotations

import signal
from typing import TYPE_CHECKING

import pytest

from chorus.events import JobEnded, parse_event
from chorus.testing import start_faulty_daemon, text

if TYPE_CHECKING:
    from conftest import Chorus

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
