"""The daemon's log survives a full disk: records are held, then written once space is back."""

from __future__ import annotations

import asyncio
import logging
import re
from typing import TYPE_CHECKING

import pytest

from chorus.daemon._logging import QuietLoopErrors, ResilientStderrHandler

if TYPE_CHECKING:
    from conftest import TinyDisk

pytestmark = pytest.mark.faults
PAD = "x" * 5000


def test_records_logged_on_a_full_disk_are_written_when_space_is_back(
    tiny_disk: TinyDisk,
) -> None:
    log_file = tiny_disk.path / "daemon.log"
    with log_file.open("w") as stream:
        handler = ResilientStderrHandler(stream, held=3)
        logger = logging.getLogger("chorus.test-resilient")
        logger.addHandler(handler)
        logger.propagate = False
        try:
            logger.error("before")
            tiny_disk.fill()
            for n in range(5):  # each longer than a page: it needs a new block
                logger.error("while full %d %s", n, PAD)  # must not raise
            assert handler.held == 3
            tiny_disk.free()
            logger.error("after")
        finally:
            logger.removeHandler(handler)
    lines = log_file.read_text().splitlines()
    assert lines[0] == "before"
    assert lines[-1] == "after"
    middle = lines[1:-1]
    notes = [line for line in middle if line.startswith("--- ")]
    assert len(notes) == 1
    assert notes[0].startswith("--- 3 log record(s) delayed")
    written = [line for line in middle if not line.startswith("--- ")]
    # Whole lines only (a line torn by the full disk is completed first), none repeated.
    for line in written:
        assert re.fullmatch(rf"(\(delayed\) )?while full \d {PAD}", line), line[:40]
    numbers = [int(line.split("while full ")[1][0]) for line in written]
    assert numbers == sorted(set(numbers))
    dropped = int(notes[0].split("; ")[1].split()[0]) if "dropped" in notes[0] else 0
    assert len(numbers) + dropped == 5


def test_loop_errors_are_logged_once_per_interval_with_a_count(
    caplog: pytest.LogCaptureFixture,
) -> None:
    now = [0.0]
    quiet = QuietLoopErrors(interval_s=10.0, clock=lambda: now[0])
    loop = asyncio.new_event_loop()
    try:
        with caplog.at_level(logging.ERROR, logger="asyncio"):
            for _ in range(1000):  # asyncio retrying a failed accept() under a flood
                quiet(loop, {"message": "socket.accept() out of system resource"})
            now[0] = 11.0
            quiet(loop, {"message": "socket.accept() out of system resource"})
            quiet(loop, {"message": "another error"})
    finally:
        loop.close()
    messages = [record.getMessage() for record in caplog.records]
    assert messages == [
        "socket.accept() out of system resource",
        "socket.accept() out of system resource (and 999 more like it, not logged)",
        "another error",
    ]
