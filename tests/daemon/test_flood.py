"""A flood of half-open TCP connections to the gateway must not take the daemon down
(case 4): a daemon limited to 1,024 open files gets 1,100 connections that
never finish their request; its unix API keeps answering, its log stays small, and
the gateway closes the flood after the request-head deadline."""

from __future__ import annotations

import contextlib
import errno
import json
import resource
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from chorus.daemon import is_responding

pytestmark = pytest.mark.faults

FLOOD = 1100
FD_LIMIT = 1024


def _low_fd_limit() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (FD_LIMIT, FD_LIMIT))


@pytest.fixture
def daemon(chorus_home: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A daemon (no agent needed) whose open-file limit is 1,024, soft and hard."""
    chorus_home.mkdir(parents=True)
    (chorus_home / "config.toml").write_text(
        "[daemon]\nnotifications = false\n[gateway]\nport = 0\n"
    )
    (chorus_home / "run").mkdir(mode=0o700)
    with (chorus_home / "run" / "daemon.log").open("ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "chorus.daemon"],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            preexec_fn=_low_fd_limit,
        )
    try:
        deadline = time.monotonic() + 30
        while not is_responding(0.5):
            assert proc.poll() is None, "the daemon exited"
            assert time.monotonic() < deadline, "the daemon did not answer"
            time.sleep(0.05)
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _half_open(port: int) -> socket.socket:
    """A connection that sends the start of a request head and never finishes it."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setblocking(False)
    sock.connect_ex(("127.0.0.1", port))
    return sock


def _start_head(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.send(b"GET /ucp HTTP/1.1\r\nHost: 127.0.0.1\r\n")


def _closed_by_server(sock: socket.socket) -> bool:
    try:
        return sock.recv(1) == b""
    except BlockingIOError:
        return False
    except OSError as exc:
        return exc.errno in (errno.ECONNRESET, errno.EPIPE, errno.ECONNREFUSED)


def test_half_open_flood_leaves_the_unix_api_answering(
    daemon: subprocess.Popen[bytes], chorus_home: Path
) -> None:
    port = json.loads((chorus_home / "run" / "gateway.json").read_text())["port"]
    flood = [_half_open(port) for _ in range(FLOOD)]
    try:
        time.sleep(1.0)
        for sock in flood:
            _start_head(sock)
        for _ in range(5):  # the unix API answers all through the flood
            assert is_responding(5.0), "the unix API stopped answering"
            time.sleep(1.0)
        assert daemon.poll() is None
        # The request-head deadline (10 s) closes the rest of the flood.
        deadline = time.monotonic() + 30
        while sum(_closed_by_server(s) for s in flood) < FLOOD:
            assert time.monotonic() < deadline, "the gateway kept half-open connections"
            time.sleep(0.5)
        assert is_responding(5.0)
    finally:
        for sock in flood:
            sock.close()
    size = (chorus_home / "run" / "daemon.log").stat().st_size
    assert size < 64 * 1024, f"daemon.log grew {size} bytes during the flood"
