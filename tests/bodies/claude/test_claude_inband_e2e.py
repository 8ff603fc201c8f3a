"""A live Claude carries an MCP server in-band (``mcp_message`` on its stdio), on the
real ``claude`` CLI, across the death of the process that owned it: the owner answers
a tool call and is killed with SIGKILL mid-turn; a new owner re-attaches from a
snapshot taken before the call, as a restarted daemon does. The call the dead owner
answered is not run again (the new owner's answer to it is an error the CLI ignores),
the CLI carries on with the first answer, and the turn ends with nothing lost."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from chorus.bodies import BodyOptions, McpServer
from chorus.bodies._detached import BodyHandle
from chorus.bodies.claude import ClaudeBody
from chorus.events import ControlRequestEvent, Event, TextDelta, TurnCompleted
from chorus.session._reattach import counted
from chorus.testing import ModelServer, Scenario, claude_env, slow_text, tool_call

pytestmark = pytest.mark.e2e
OWNER = Path(__file__).with_name("inband_owner.py")
WORDS = " ".join(f"w{i}" for i in range(24))


def _owned(claude: Path, tmp_path: Path, url: str) -> tuple[dict[str, Any], dict[str, str]]:
    work, run_dir = tmp_path / "work", tmp_path / "run" / "s1"
    work.mkdir()
    env = claude_env(tmp_path / "home", url)
    env_file = tmp_path / "env.json"
    env_file.write_text(json.dumps(env))
    calls = tmp_path / "calls.jsonl"
    argv = [sys.executable, str(OWNER), str(claude), str(env_file), str(work), str(run_dir)]
    done = subprocess.run(
        [*argv, str(calls), "4"], capture_output=True, text=True, timeout=120, env=os.environ.copy()
    )
    assert done.returncode == -9, done.stderr[-2000:]
    return json.loads(done.stdout), env


@pytest.mark.parametrize("stored", ["all", "up_to_the_call"])
async def test_a_call_the_dead_owner_answered_is_not_run_again_by_the_next(
    claude: Path, tmp_path: Path, stored: str
) -> None:
    """``all``: the dead owner's events were all stored (the new one skips them);
    ``up_to_the_call``: it died after answering the call, before storing the call's
    request or anything after it (the new one hands those out again)."""
    scenario = Scenario.of(
        tool_call("mcp__chorus__remember", {"text": "the host is db-7"}),
        slow_text(WORDS, chunks=24, delay=0.15),
    )
    again: list[dict[str, Any]] = []

    async def answer(message: dict[str, Any]) -> dict[str, Any] | None:
        again.append(message)
        return {"jsonrpc": "2.0", "id": message.get("id"), "result": {"content": []}}

    with ModelServer(scenario) as server:
        owned, env = _owned(claude, tmp_path, server.url)
        handle = BodyHandle.from_dict(owned["handle"])
        inband = McpServer(url="http://127.0.0.1:9/unused", inband=answer)
        options = BodyOptions(
            cwd=tmp_path / "work",
            env=env,
            executable=claude,
            run_dir=handle.run_dir,
            permission_mode="bypassPermissions",
            mcp_servers={"chorus": inband},
        )
        drop = owned["handed"] if stored == "all" else owned["before_call"]
        assert drop >= 0
        body = await ClaudeBody.attach(options, handle, turn_open=True, drop=drop, counted=counted)
        rest: list[Event] = [event async for event in body.follow()]
        await body.close()
        requests = server.turn_requests()
    calls = (tmp_path / "calls.jsonl").read_text().splitlines()
    assert [json.loads(c)["name"] for c in calls] == ["remember"]  # run once, by the owner
    assert [m.get("method") for m in again] == []  # the new owner ran nothing
    tool_result = requests[1].last_tool_result()
    assert tool_result is not None
    assert "stored-1" in tool_result.content  # the CLI kept the first answer
    replayed = [e for e in rest if isinstance(e, ControlRequestEvent)]
    after = [e.text for e in rest if isinstance(e, TextDelta)]
    if stored == "all":
        assert not replayed  # nothing handed out twice
        assert "".join(owned["texts"] + after) == WORDS
    else:  # the call's request is handed out again, answered with an error the CLI ignores
        assert [r.payload["message"]["method"] for r in replayed] == ["tools/call"]
        assert "".join(after) == WORDS
    assert isinstance(rest[-1], TurnCompleted)
    assert len(requests) == 2  # the turn was not run again
