"""What the daemon loads before it serves: not the talk transcript readers (every CLI's
codec and the ACP SDK's schema: most of its start-up CPU), not the MCP SDK, not the
dashboard's Markdown and code colouring. They load when first used (a talk, a page,
the first job: the MCP SDK of its body's channel); the routed bodies' code loads in
the warm-up of a daemon ``chorus start`` started, once it serves."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

#: Loaded on first use, never to start serving.
LATER = ("acp", "chorus.bodies._talk", "chorus.bodies.gemini", "markdown_it", "pygments", "mcp")


def loaded_by(module: str) -> set[str]:
    code = f"import sys, json, {module}; print(json.dumps(sorted(sys.modules)))"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    return set(json.loads(done.stdout))


def later(modules: set[str]) -> set[str]:
    return {m for m in modules if any(m == n or m.startswith(n + ".") for n in LATER)}


def test_the_daemon_serves_before_loading_what_waits_for_first_use() -> None:
    assert later(loaded_by("chorus.daemon._server")) == set()


@pytest.mark.parametrize(
    ("module", "needs"),
    [
        ("chorus.bodies._talk", "acp"),
        ("chorus.dashboard._render; chorus.dashboard._render.markdown_html('x')", "markdown_it"),
        ("chorus.daemon._warmup; chorus.daemon._warmup._channel_sdk()", "mcp"),
    ],
)
def test_the_check_sees_them_when_used(module: str, needs: str) -> None:
    assert needs in later(loaded_by(module))


def test_the_first_job_loads_the_mcp_sdk_once() -> None:
    """At the first job's start the MCP SDK loads in a thread (the job goes on
    meanwhile); later jobs start no second load."""
    code = """
import asyncio, json, sys
from chorus.daemon._warmup import first_job_warms_up

async def main():
    started = first_job_warms_up()
    before = "mcp" in sys.modules
    await started(None)
    await started(None)
    loads = [t for t in asyncio.all_tasks() if t.get_name() == "mcp-import"]
    await asyncio.gather(*loads)
    print(json.dumps([before, len(loads), "mcp.server.mcpserver" in sys.modules]))

asyncio.run(main())
"""
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert json.loads(done.stdout) == [False, 1, True]
