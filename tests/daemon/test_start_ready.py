"""`chorus start` returns when the daemon serves (it says so on a pipe, no polling),
from a client that loads nothing heavy; the daemon's own output then goes to
``run/daemon.log``, and once it serves it warms up what the first job needs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from chorus.client._lifecycle import READY
from chorus.daemon import is_responding, stop_daemon

HEAVY = ("typer", "rich", "pydantic", "httpx", "starlette", "uvicorn", "acp")


@pytest.fixture
def home(chorus_home: Path) -> Iterator[Path]:
    chorus_home.mkdir()
    (chorus_home / "config.toml").write_text(
        "[daemon]\nnotifications = false\n[gateway]\ntcp = false\n[dashboard]\nport = 0\n"
    )
    yield chorus_home
    stop_daemon()


def _start(*flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *flags, "-m", "chorus", "start", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        env=os.environ.copy(),
    )


def test_start_returns_once_the_daemon_serves_from_a_light_client(home: Path) -> None:
    done = _start("-X", "importtime")
    assert done.returncode == 0, done.stderr[-2000:]
    assert is_responding(), "start returned before the daemon answered"
    loaded = {
        line.rsplit("|", 1)[1].strip()
        for line in done.stderr.splitlines()
        if line.startswith("import time:")
    }
    assert "chorus.client._lifecycle" in loaded  # the listing is the client's own
    assert {n for n in loaded if n.split(".")[0] in HEAVY} == set()
    pid = json.loads(done.stdout)["pid"]
    assert int((home / "run" / "daemon.pid").read_text()) == pid


def test_the_daemon_moves_its_output_to_the_log(home: Path) -> None:
    assert _start().returncode == 0
    pid = int((home / "run" / "daemon.pid").read_text())
    log = str(home / "run" / "daemon.log")
    assert [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in (1, 2)] == [log, log]
    assert READY.decode().strip() not in Path(log).read_text()


def test_a_bad_config_is_said_by_the_daemon_and_nothing_runs(home: Path) -> None:
    (home / "config.toml").write_text('[router]\nbodies = ["claude", "clod"]\n')
    done = _start()
    assert done.returncode == 2, done.stderr
    assert "router.bodies" in done.stderr
    assert "Traceback" not in done.stderr
    assert not is_responding()
    assert not (home / "run").exists()


def test_the_daemon_warms_up_the_system_facts_before_any_job(home: Path) -> None:
    spec = home / "workspace" / "system.json"
    assert _start().returncode == 0
    deadline = time.monotonic() + 90
    while not spec.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert spec.exists(), "no warm-up: system facts not cached"
    assert json.loads(spec.read_text())["cpus"] == os.cpu_count()
    assert is_responding()


def _cpu_ticks(pid: int) -> int:
    """The clock ticks process ``pid`` has used, its threads' and reaped children's."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(f) for f in fields[11:15])


def _until_idle(pid: int, window: float = 1.0, patience: float = 90.0) -> None:
    """Return once ``pid`` used under 3% of a CPU for two windows in a row."""
    quiet, before = 0, _cpu_ticks(pid)
    deadline = time.monotonic() + patience
    while quiet < 2 and time.monotonic() < deadline:
        time.sleep(window)
        now = _cpu_ticks(pid)
        quiet = quiet + 1 if now - before < 0.03 * window * os.sysconf("SC_CLK_TCK") else 0
        before = now
    assert quiet >= 2, f"daemon {pid} still busy after {patience:.0f} s"


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc")
def test_a_daemon_started_for_a_request_does_not_warm_up(home: Path) -> None:
    """A request that finds no daemon (``chorus ask``, say) starts one that skips the
    warm-up: the request loads what it needs itself. No system facts are probed."""
    done = subprocess.run(
        [sys.executable, "-c", "from chorus.client import start_daemon; start_daemon()"],
        capture_output=True,
        text=True,
        timeout=120,
        env=os.environ.copy(),
    )
    assert done.returncode == 0, done.stderr[-2000:]
    pid = int((home / "run" / "daemon.pid").read_text())
    _until_idle(pid)
    assert is_responding()
    assert not (home / "workspace" / "system.json").exists()
