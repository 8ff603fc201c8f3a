"""Detached bodies at the body level, on the real ``claude`` CLI: a body started with
``run_dir`` outlives the process that owned it (killed with SIGKILL mid-turn), and a
new owner re-attaches by offset: the same CLI process finishes the same turn, the
scripted server saw one request, and no event is lost or repeated."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from chorus import BodyCrashedError
from chorus.bodies import BodyOptions
from chorus.bodies._detached import BodyHandle, start_time
from chorus.bodies.claude import ClaudeBody
from chorus.events import Event, TextDelta, TurnCompleted
from chorus.testing import ModelServer, Scenario, claude_env, slow_text

pytestmark = pytest.mark.e2e
OWNER = Path(__file__).with_name("detached_owner.py")
WORDS = " ".join(f"w{i}" for i in range(30))


def _owner(
    claude: Path, tmp_path: Path, url: str, deltas: int
) -> tuple[BodyOptions, dict[str, Any]]:
    work, run_dir = tmp_path / "work", tmp_path / "run" / "s1"
    work.mkdir(exist_ok=True)
    env = claude_env(tmp_path / "home", url)
    env_file = tmp_path / "env.json"
    env_file.write_text(json.dumps(env))
    argv = [sys.executable, str(OWNER), str(claude), str(env_file), str(work), str(run_dir)]
    done = subprocess.run(
        [*argv, str(deltas)], capture_output=True, text=True, timeout=120, env=os.environ.copy()
    )
    assert done.returncode == -9, done.stderr[-2000:]
    options = BodyOptions(cwd=work, env=env, executable=claude, run_dir=run_dir)
    return options, json.loads(done.stdout)


async def test_kill_9_of_the_owner_mid_turn_then_reattach_finishes_the_turn(
    claude: Path, tmp_path: Path
) -> None:
    with ModelServer(Scenario.of(slow_text(WORDS, chunks=30, delay=0.15))) as server:
        options, owned = _owner(claude, tmp_path, server.url, deltas=5)
        handle = BodyHandle.from_dict(owned["handle"])
        assert handle.pid == owned["cli_pid"]
        body = await ClaudeBody.attach(options, handle, turn_open=True)
        assert body.pid == handle.pid  # the very process the dead owner started
        rest: list[Event] = [event async for event in body.follow()]
        await body.close()
        requests = server.turn_requests()
    before = owned["texts"]
    after = [e.text for e in rest if isinstance(e, TextDelta)]
    assert len(before) == 5
    assert "".join(before + after) == WORDS  # nothing lost, nothing twice
    done = rest[-1]
    assert isinstance(done, TurnCompleted)
    assert done.result == WORDS
    assert len(requests) == 1  # the turn was not run again
    assert not handle.run_dir.exists()  # close removed the session's files


async def test_reattach_to_a_dead_body_or_a_cut_output_file_is_a_crash(
    claude: Path, tmp_path: Path
) -> None:
    with ModelServer(Scenario.of(slow_text(WORDS, chunks=30, delay=0.15))) as server:
        options, owned = _owner(claude, tmp_path, server.url, deltas=3)
    handle = BodyHandle.from_dict(owned["handle"])
    (handle.run_dir / "stdout").write_bytes(b"")  # truncated under us
    with pytest.raises(BodyCrashedError, match="cut"):
        await ClaudeBody.attach(options, handle, turn_open=True)
    os.killpg(handle.pid, signal.SIGKILL)
    for _ in range(200):
        if start_time(handle.pid) is None:
            break
        await asyncio.sleep(0.05)
    with pytest.raises(BodyCrashedError, match="gone"):
        await ClaudeBody.attach(options, handle, turn_open=True)
