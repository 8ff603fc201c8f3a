"""Warm bodies are bounded (case 8): each ``chorus ask`` is a new session,
and without a cap every one kept its CLI process for the idle timeout (the soak
found thousands). With ``max_idle_bodies = 2`` six jobs leave at most three."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from chorus.daemon import DaemonClient, stop_daemon
from tests._wait import until

pytestmark = pytest.mark.faults

AGENT = Path(__file__).resolve().parents[1] / "bodies" / "acp" / "fake_acp_agent.py"


def _agents_of(pid: int) -> int:
    """Live fake-agent processes whose parent is ``pid``."""
    count = 0
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            stat = (proc / "stat").read_text()
            cmdline = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == pid and b"fake_acp_agent" in cmdline:
            count += 1
    return count


def test_idle_warm_bodies_are_capped(chorus_home: Path, tmp_path: Path) -> None:
    chorus_home.mkdir()
    (chorus_home / "config.toml").write_text(
        "[daemon]\nnotifications = false\nmax_idle_bodies = 2\n[gateway]\ntcp = false\n"
        f"[agents.fake]\ncommand = {json.dumps(sys.executable)}\n"
        f'args = [{json.dumps(str(AGENT))}]\nprotocol = "acp"\n'
    )
    started = subprocess.run(
        [sys.executable, "-m", "chorus", "start"], capture_output=True, text=True, timeout=60
    )
    assert started.returncode == 0, started.stderr
    pid = int((chorus_home / "run" / "daemon.pid").read_text())
    client = DaemonClient(autostart=False)
    try:
        for _ in range(6):  # one after the other, each on a new session
            job = client.submit(prompt="hello", body="fake", cwd=str(tmp_path))
            deadline = time.monotonic() + 60
            while client.job(job["id"])["state"] != "succeeded":
                assert time.monotonic() < deadline, client.job(job["id"])
                time.sleep(0.05)
        until(lambda: _agents_of(pid) <= 3, 10)  # closing a trimmed body takes a moment
    finally:
        stop_daemon()
