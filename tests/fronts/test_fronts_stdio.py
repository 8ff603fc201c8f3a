"""The fronts' stdio edges, line by line: queued turns finished after stdin EOF, bad
lines answered with protocol errors while serving on, an unreachable daemon."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import acp
import pytest

from chorus.testing import text

if TYPE_CHECKING:
    from conftest import FrontHome

pytestmark = pytest.mark.e2e

BIN = Path(sys.executable).parent


def _run(
    argv: list[str], lines: list[Any], cwd: Path, timeout: float = 180
) -> tuple[int, list[Any], str]:
    stdin = "".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines)
    run = subprocess.run(
        argv, input=stdin, capture_output=True, text=True, timeout=timeout, cwd=cwd
    )
    frames = [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]
    return run.returncode, frames, run.stderr


def _control(request_id: str, subtype: str, **fields: Any) -> dict[str, Any]:
    return {
        "type": "control_request",
        "request_id": request_id,
        "request": {"subtype": subtype, **fields},
    }


def _user(content: str) -> dict[str, Any]:
    return {"type": "user", "message": {"role": "user", "content": content}, "session_id": ""}


def test_claude_front_finishes_queued_turns_after_eof_and_answers_bad_lines(
    front_home: FrontHome,
) -> None:
    front_home.server.script([text("first answer"), text("second answer")])
    lines = [
        _control("req_1", "initialize", hooks=None),
        "{this is not json",
        _control("req_2", "get_context_usage"),
        _user("one"),
        _user("two"),
        _control("req_3", "set_permission_mode", mode="plan"),
        _control("req_4", "mcp_status"),
    ]
    argv = [str(BIN / "chorus-claude"), "--output-format", "stream-json", "--chorus-body", "codex"]
    code, frames, stderr = _run(argv, lines, front_home.work)
    assert code == 0, stderr
    answers = {
        f["response"]["request_id"]: f["response"]
        for f in frames
        if f["type"] == "control_response"
    }
    assert answers["req_1"]["subtype"] == "success"
    assert answers["req_1"]["response"]["models"]
    assert answers[""]["subtype"] == "error"  # the malformed line
    assert "get_context_usage" in answers["req_2"]["error"]
    assert answers["req_3"]["response"] == {"mode": "plan"}
    assert "req_4" in answers  # mcp_status: the body's answer or an error, never silence
    results = [f for f in frames if f["type"] == "result"]
    assert [r["result"] for r in results] == ["first answer", "second answer"]
    assert all(r["subtype"] == "success" and "usage" in r for r in results)
    inits = [f for f in frames if f.get("subtype") == "init"]
    assert len(inits) == 2  # one system/init per turn, as Claude Code does
    assert inits[0]["claude_code_version"]


def _unreachable(chorus_home: Path) -> None:
    """A home whose daemon cannot start (its config does not parse)."""
    chorus_home.mkdir(parents=True, exist_ok=True)
    (chorus_home / "config.toml").write_text("this is = = not toml\n")


@pytest.mark.parametrize("front", ["claude", "codex"])
def test_an_unreachable_daemon_is_an_error_frame_and_exit_1(
    chorus_home: Path, tmp_path: Path, front: str
) -> None:
    _unreachable(chorus_home)
    if front == "claude":
        argv = [str(BIN / "chorus-claude")]
        lines: list[Any] = [_control("req_1", "initialize")]
    else:
        argv = [str(BIN / "chorus-codex"), "app-server", "--listen", "stdio://"]
        lines = [
            {"id": 1, "method": "initialize", "params": {}},
            {"id": 2, "method": "thread/start", "params": {}},
        ]
    code, frames, stderr = _run(argv, lines, tmp_path, timeout=90)
    assert code == 1
    assert "could not start" in stderr
    assert "could not start" in json.dumps(frames[-1])
    errors = [f for f in frames if "error" in f or f.get("response", {}).get("subtype") == "error"]
    assert errors  # the pending request got its error answer


async def test_an_unreachable_daemon_is_a_json_rpc_error_for_acp(
    chorus_home: Path, tmp_path: Path
) -> None:
    _unreachable(chorus_home)

    class Quiet:
        async def session_update(self, *args: Any, **kw: Any) -> None:
            pass

        def on_connect(self, conn: Any) -> None:
            pass

    env = os.environ.copy()  # the ACP SDK passes only a safe default environment
    chorus = str(BIN / "chorus")
    async with acp.spawn_agent_process(Quiet(), chorus, "acp", env=env, cwd=tmp_path) as (
        conn,
        _process,
    ):
        await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
        with pytest.raises(acp.RequestError) as raised:
            await asyncio.wait_for(conn.new_session(cwd=str(tmp_path), mcp_servers=[]), 90)
    assert "could not start" in str(raised.value.data)
    assert "could not start" in str(raised.value)  # in the message an editor shows


def test_bad_command_lines_exit_2(tmp_path: Path) -> None:
    for argv in (
        [str(BIN / "chorus"), "acp", "--no-such-flag"],
        [str(BIN / "chorus"), "codex-app-server", "--listen", "ws://x"],
        [str(BIN / "chorus-claude"), "--input-format", "text"],
    ):
        run = subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd=tmp_path)
        assert run.returncode == 2, (argv, run.stderr)
