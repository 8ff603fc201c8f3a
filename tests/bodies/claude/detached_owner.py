"""Helper for test_claude_detached_e2e: own a detached Claude body, start a slow turn,
hand out some events, print the body's handle, then die by SIGKILL (as a daemon
killed with -9 would). Arguments: executable, home env JSON file, work dir, run dir,
events to take before dying."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path

from chorus.bodies import BodyOptions
from chorus.bodies.claude import ClaudeBody
from chorus.events import TextDelta


async def main() -> None:
    exe, env_file, work, run_dir, deltas = sys.argv[1:6]
    env = json.loads(Path(env_file).read_text())
    options = BodyOptions(cwd=Path(work), env=env, executable=Path(exe), run_dir=Path(run_dir))
    body = ClaudeBody(options)
    await body.start()
    texts: list[str] = []
    async for event in body.turn("talk slowly"):
        if isinstance(event, TextDelta):
            texts.append(event.text)
            if len(texts) == int(deltas):
                break
    handle = body.handle()
    assert handle is not None
    print(json.dumps({"handle": handle.as_dict(), "texts": texts, "cli_pid": body.pid}), flush=True)
    os.kill(os.getpid(), signal.SIGKILL)


asyncio.run(main())
