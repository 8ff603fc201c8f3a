"""Desktop notification when a job ends (notify-send), and the switch to turn it off."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from chorus.daemon import stop_daemon
from chorus.testing import text

if TYPE_CHECKING:
    from conftest import Chorus

pytestmark = pytest.mark.e2e


def _fake_notify_send(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    log = tmp_path / "notified.txt"
    script = bindir / "notify-send"
    script.write_text(f'#!/bin/sh\nprintf "%s|%s\\n" "$1" "$2" >> {log}\n')
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    return log


def _set_notifications(home: Path, on: bool) -> None:
    config = home / "config.toml"
    config.write_text(
        config.read_text().replace("notifications = false", f"notifications = {str(on).lower()}")
    )


def test_job_end_sends_a_desktop_notification(
    chorus: Chorus, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = _fake_notify_send(tmp_path, monkeypatch)
    _set_notifications(chorus.home, True)
    chorus.server.script([text("notified")])
    assert chorus.run("ask", "tell me when done", "--body", "claude").returncode == 0
    deadline = time.monotonic() + 10
    while not log.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert log.read_text().splitlines() == ["Chorus job succeeded|tell me when done"]


def test_notifications_can_be_turned_off(
    chorus: Chorus, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = _fake_notify_send(tmp_path, monkeypatch)
    chorus.server.script([text("quiet")])
    assert chorus.run("ask", "no noise", "--body", "claude").returncode == 0
    stop_daemon()  # the daemon has finished every hook once it has stopped
    assert not log.exists()
