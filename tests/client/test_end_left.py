"""``chorus stop`` ends the meter process a daemon left running, as its pid file names
it, and loads the bodies' and the meter's code only when something is left to end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from chorus.client import end_bodies_left

#: Runs end_bodies_left(), then prints its answer and whether the meter's code loaded.
PROBE = """
import json, sys
from chorus.client import end_bodies_left
ended = end_bodies_left()
print(json.dumps({"ended": ended, "meter_loaded": "chorus.meter" in sys.modules}))
"""


def _started(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(["sleep", "120"], start_new_session=True)
    yield proc
    proc.kill()
    proc.wait()


def _meter_pid_file(home: Path, pid: int, started: int) -> None:
    meter = home / "run" / "meter"
    meter.mkdir(parents=True)
    (meter / "pid").write_text(json.dumps({"pid": pid, "started": started, "port": 1}))


def _probe() -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60, check=True
    )
    return dict(json.loads(done.stdout))


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc")
def test_a_live_meter_left_running_is_ended(
    chorus_home: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    _meter_pid_file(chorus_home, sleeper.pid, _started(sleeper.pid))
    assert end_bodies_left() == 0  # bodies counted; the meter is ended too
    assert sleeper.wait(timeout=30) == -15  # SIGTERM


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc")
def test_a_stale_meter_pid_file_loads_nothing_and_signals_nobody(
    chorus_home: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    _meter_pid_file(chorus_home, sleeper.pid, _started(sleeper.pid) + 1)  # a reused pid
    assert _probe() == {"ended": 0, "meter_loaded": False}
    assert sleeper.poll() is None
    (chorus_home / "run" / "meter" / "pid").write_text("not json")
    assert _probe() == {"ended": 0, "meter_loaded": False}


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc")
def test_the_check_sees_a_live_meter(chorus_home: Path, sleeper: subprocess.Popen[bytes]) -> None:
    """The probe can fail: with a live meter the meter's code loads to end it."""
    _meter_pid_file(chorus_home, sleeper.pid, _started(sleeper.pid))
    assert _probe() == {"ended": 0, "meter_loaded": True}
    assert sleeper.wait(timeout=30) == -15
