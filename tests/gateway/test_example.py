"""``examples/brain_client.py`` drives a real body through the gateway."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from chorus.testing import shell, text

if TYPE_CHECKING:
    from conftest import Harness

pytestmark = pytest.mark.e2e
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "brain_client.py"


async def test_example_brain_runs_a_tool_through_the_gateway(harness: Harness) -> None:
    if "claude" not in harness.clis:
        pytest.skip("claude CLI not installed")
    harness.server.script([shell("echo from-the-brain > hello.txt"), text("made hello.txt")])
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(EXAMPLE),
        "make hello.txt",
        "--url",
        harness.url,
        "--token",
        harness.token,
        "--cwd",
        str(harness.work),
        "--mode",
        "bypassPermissions",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 90)
    text_out = out.decode()
    assert proc.returncode == 0, text_out
    assert "made hello.txt" in text_out
    assert "turn_completed" in text_out
    assert (harness.work / "hello.txt").read_text() == "from-the-brain\n"
