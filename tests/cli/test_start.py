"""``chorus start`` says when the TCP gateway could not start (case 7)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from chorus.daemon import stop_daemon

pytestmark = pytest.mark.faults


def _chorus(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "chorus", *args], capture_output=True, text=True, timeout=60
    )


def test_start_says_the_gateway_is_off_when_its_port_is_taken(chorus_home: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        chorus_home.mkdir()
        (chorus_home / "config.toml").write_text(
            f"[daemon]\nnotifications = false\n[gateway]\nport = {port}\n"
        )
        try:
            # the first start has it from the daemon's ready line, the second asks
            as_json = json.loads(_chorus("start", "--json").stdout)
            assert as_json["gateway_tcp"] is None
            assert f":{port}" in as_json["gateway_tcp_error"]
            started = _chorus("start")
            assert started.returncode == 0, started.stderr
            warning = started.stderr.replace("\n", " ")
            assert "the TCP gateway is off" in warning
            assert f"127.0.0.1:{port}" in warning
        finally:
            stop_daemon()


def test_start_is_quiet_about_a_working_gateway(chorus_home: Path) -> None:
    chorus_home.mkdir()
    (chorus_home / "config.toml").write_text(
        "[daemon]\nnotifications = false\n[gateway]\nport = 0\n"
    )
    try:
        assert json.loads(_chorus("start", "--json").stdout)["gateway_tcp"].startswith("ws://")
        started = _chorus("start")
        assert started.returncode == 0
        assert "gateway" not in started.stderr
    finally:
        stop_daemon()
