"""`chorus talk`: hand a session to the agent's own CLI, pause its queue meanwhile."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from chorus.testing import text

if TYPE_CHECKING:
    from conftest import Chorus

pytestmark = pytest.mark.e2e

# Stands in for the interactive CLI (a TTY program the tests cannot drive): it
# records how it was started, then stays until the test releases it.
FAKE_INTERACTIVE = """#!{python}
import json, os, sys, time
with open({record!r}, "w") as f:
    json.dump({{"argv": sys.argv[1:], "cwd": os.getcwd()}}, f)
deadline = time.monotonic() + 60
while not os.path.exists({release!r}) and time.monotonic() < deadline:
    time.sleep(0.05)
"""


def test_talk_resumes_the_native_session_and_pauses_the_queue(
    chorus: Chorus, tmp_path: Path
) -> None:
    chorus.server.script([text("first answer"), text("after talk")])
    first = chorus.run("ask", "hello", "--body", "claude", "--json")
    assert first.returncode == 0, first.stderr
    job = chorus.client.job(json.loads(first.stdout.splitlines()[0])["job_id"])
    session = chorus.client.session(job["session_id"])
    assert session["native_session_id"]

    record, release = tmp_path / "talk.json", tmp_path / "release"
    fake = tmp_path / "fake-claude"
    fake.write_text(
        FAKE_INTERACTIVE.format(python=sys.executable, record=str(record), release=str(release))
    )
    fake.chmod(0o755)
    with (chorus.home / "config.toml").open("a") as f:
        f.write(f'[agents.claude]\ncommand = "{fake}"\n')

    primary, terminal = pty.openpty()  # talk wants a terminal
    talk = subprocess.Popen(
        [sys.executable, "-m", "chorus", "talk", session["id"][:10]],
        stdin=terminal,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=chorus.work,
    )
    os.close(terminal)
    deadline = time.monotonic() + 30
    while not record.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    queued = chorus.run("task", "while talking", "--session", session["id"]).stdout.strip()
    time.sleep(1.5)
    assert chorus.client.job(queued)["state"] == "queued"  # paused while the person talks
    release.touch()
    _out, err = talk.communicate(timeout=30)
    os.close(primary)
    assert talk.returncode == 0, err
    started = json.loads(record.read_text())
    assert started["argv"] == ["--resume", session["native_session_id"]]
    assert started["cwd"] == session["cwd"]
    assert chorus.run("watch", queued).returncode == 0  # taken back, the queue runs
    assert chorus.client.job(queued)["state"] == "succeeded"


def test_talk_without_a_terminal_says_so(chorus: Chorus) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "chorus", "talk"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=chorus.work,
    )
    assert done.returncode == 2
    assert "run it in a terminal" in done.stderr
    assert "Traceback" not in done.stderr
