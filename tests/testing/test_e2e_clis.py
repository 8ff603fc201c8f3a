"""End to end: the real pinned CLIs against the scripted fake model server.

Each run is one headless turn (about 1-4 s). Error runs fail fast because the
offline env turns each CLI's retries off; the per-test timeout bounds them.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable

import pytest

from chorus.testing import (
    CLIS,
    Cli,
    HeadlessRun,
    ModelServer,
    OfflineCli,
    Scenario,
    error,
    shell,
    slow_text,
    text,
    write_file,
)

pytestmark = pytest.mark.e2e

PROMPT = "make out.txt"
SHELL_TOOL: dict[Cli, str] = {
    "claude": "Bash",
    "codex": "exec_command",
    "gemini": "run_shell_command",
}
WRITE_TOOL: dict[Cli, str] = {"claude": "Write", "codex": "apply_patch", "gemini": "write_file"}

MakeCli = Callable[..., OfflineCli]


def final_text(cli: Cli, run: HeadlessRun) -> str:
    """The CLI's last assistant answer as shown on its JSON stdout."""
    if cli == "claude":
        return str(run.of_type("result")[-1]["result"])
    if cli == "codex":
        messages = [e["item"] for e in run.of_type("item.completed")]
        return str([m for m in messages if m["type"] == "agent_message"][-1]["text"])
    deltas = [e for e in run.of_type("message") if e.get("role") == "assistant"]
    return str(deltas[-1]["content"])


def assert_succeeded(cli: Cli, run: HeadlessRun) -> None:
    assert run.returncode == 0, run.stderr
    if cli == "claude":
        assert run.of_type("result")[-1]["is_error"] is False
    elif cli == "codex":
        assert run.of_type("turn.completed")
    else:
        assert run.of_type("result")[-1]["status"] == "success"


@pytest.mark.timeout(60)
@pytest.mark.parametrize("cli", CLIS)
def test_shell_tool_writes_file_then_answers(
    cli: Cli, model_server: ModelServer, offline_cli: MakeCli
) -> None:
    model_server.script(
        Scenario.of(shell("echo hello > out.txt", say="Creating out.txt."), text("done"))
    )
    rig = offline_cli(cli)
    run = rig.run(PROMPT, timeout=45)

    assert_succeeded(cli, run)
    assert (rig.cwd / "out.txt").read_text() == "hello\n"
    assert final_text(cli, run) == "done"
    first, second = model_server.turn_requests()
    assert first.last_user_text() == PROMPT
    assert not first.has_tool_result
    result = second.last_tool_result()
    assert result is not None
    assert result.name == SHELL_TOOL[cli]
    assert not result.is_error
    assert second.last_user_text() == PROMPT
    assert model_server.remaining_turns() == 0
    assert model_server.requests_of("exhausted") == []


@pytest.mark.timeout(60)
@pytest.mark.parametrize("cli", CLIS)
def test_write_tool_creates_file_then_answers(
    cli: Cli, model_server: ModelServer, offline_cli: MakeCli
) -> None:
    model_server.script([write_file("notes/note.txt", "line one\nline two\n"), text("written")])
    rig = offline_cli(cli)
    run = rig.run("write the note", timeout=45)

    assert_succeeded(cli, run)
    assert (rig.cwd / "notes" / "note.txt").read_text() == "line one\nline two\n"
    assert final_text(cli, run) == "written"
    result = model_server.turn_requests()[1].last_tool_result()
    assert result is not None
    assert result.name == WRITE_TOOL[cli]
    assert not result.is_error


@pytest.mark.timeout(20)
def test_claude_quota_429_fails_at_once(model_server: ModelServer, offline_cli: MakeCli) -> None:
    """Quota answers carry ``x-should-retry: false``: no retry even at default settings."""
    model_server.script([error("quota", times=None)])
    run = offline_cli("claude", max_retries=None).run(PROMPT, timeout=15)

    assert run.returncode == 1
    result = run.of_type("result")[-1]
    assert result["is_error"] is True
    assert result["api_error_status"] == 429
    assert result["api_error_type"] == "rate_limit_error"
    assert result["terminal_reason"] == "api_error"
    assert "usage limits" in result["result"]
    assert run.of_type("system")[0]["subtype"] == "init"
    assert not [e for e in run.of_type("system") if e.get("subtype") == "api_retry"]
    assert len(model_server.turn_requests()) == 1


@pytest.mark.timeout(20)
def test_claude_rate_limit_retries_are_bounded_by_env(
    model_server: ModelServer, offline_cli: MakeCli
) -> None:
    """CLAUDE_CODE_MAX_RETRIES=1: one api_retry line, two requests, then the 429 result."""
    model_server.script([error("rate_limit", times=None)])
    run = offline_cli("claude", max_retries=1).run(PROMPT, timeout=15)

    assert run.returncode == 1
    retries = [e for e in run.of_type("system") if e.get("subtype") == "api_retry"]
    assert [(r["attempt"], r["max_retries"], r["error_status"]) for r in retries] == [(1, 1, 429)]
    assert run.of_type("result")[-1]["api_error_status"] == 429
    assert len(model_server.turn_requests()) == 2


@pytest.mark.timeout(20)
def test_claude_recovers_after_a_retried_429(
    model_server: ModelServer, offline_cli: MakeCli
) -> None:
    model_server.script([error("rate_limit"), text("recovered")])
    run = offline_cli("claude", max_retries=2).run(PROMPT, timeout=15)

    assert_succeeded("claude", run)
    assert final_text("claude", run) == "recovered"
    assert [r.status for r in model_server.turn_requests()] == [429, 200]


@pytest.mark.timeout(20)
def test_codex_quota_429_fails_the_turn(model_server: ModelServer, offline_cli: MakeCli) -> None:
    model_server.script([error("quota", times=None)])
    run = offline_cli("codex").run(PROMPT, timeout=15)

    assert run.returncode == 1
    failed = run.of_type("turn.failed")
    assert len(failed) == 1
    assert failed[0]["error"]["message"].startswith("Quota exceeded.")
    assert len(model_server.turn_requests()) == 1


@pytest.mark.timeout(20)
def test_codex_rate_limit_without_retries(model_server: ModelServer, offline_cli: MakeCli) -> None:
    model_server.script([error("rate_limit", times=None)])
    run = offline_cli("codex").run(PROMPT, timeout=15)

    assert run.returncode == 1
    message = run.of_type("turn.failed")[0]["error"]["message"]
    assert message == "exceeded retry limit, last status: 429 Too Many Requests"
    assert len(model_server.turn_requests()) == 1


@pytest.mark.timeout(20)
def test_gemini_daily_quota_exits_173(model_server: ModelServer, offline_cli: MakeCli) -> None:
    model_server.script([error("quota", times=None)])
    run = offline_cli("gemini").run(PROMPT, timeout=15)

    assert run.returncode == 173  # HTTP 429 & 0xFF
    result = run.of_type("result")[-1]
    assert result["status"] == "error"
    assert "exhausted your daily quota" in result["error"]["message"]
    assert len(model_server.turn_requests()) == 1


@pytest.mark.timeout(20)
def test_gemini_server_error_exits_244(model_server: ModelServer, offline_cli: MakeCli) -> None:
    model_server.script([error("server_error", times=None)])
    run = offline_cli("gemini").run(PROMPT, timeout=15)

    assert run.returncode == 244  # HTTP 500 & 0xFF
    assert run.of_type("result")[-1]["status"] == "error"
    assert len(model_server.turn_requests()) == 1


@pytest.mark.timeout(60)
@pytest.mark.parametrize("cli", CLIS)
def test_killing_the_cli_mid_stream_is_seen_as_a_disconnect(
    cli: Cli, model_server: ModelServer, offline_cli: MakeCli
) -> None:
    """A 4 s slow stream cut by killing the CLI: the server notices and keeps serving."""
    model_server.script([slow_text("x" * 20, chunks=20, delay=0.2)])
    rig = offline_cli(cli)
    process = subprocess.Popen(
        rig.argv(PROMPT),
        cwd=rig.cwd,
        env=rig.env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # its own process group, so the kill reaches its children only
    )
    try:
        model_server.wait_for(lambda rs: any(r.kind == "turn" for r in rs), timeout=30)
        time.sleep(0.5)  # let a few chunks through before cutting the stream
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)

    requests = model_server.wait_for(
        lambda rs: all(r.finished for r in rs if r.kind == "turn"), timeout=5
    )
    (turn,) = [r for r in requests if r.kind == "turn"]
    assert turn.disconnected
    assert turn.status == 200


@pytest.mark.timeout(60)
def test_gemini_auto_model_router_call_does_not_consume_turns(
    model_server: ModelServer, offline_cli: MakeCli
) -> None:
    model_server.script([text("routed answer")])
    rig = offline_cli("gemini")
    argv = [a for a in rig.argv(PROMPT) if a not in ("-m", "gemini-2.5-flash")]
    done = subprocess.run(
        argv,
        cwd=rig.cwd,
        env=rig.env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=45,
        check=False,
    )

    assert done.returncode == 0, done.stderr
    assert '"content":"routed answer"' in done.stdout
    side = model_server.requests_of("side")
    assert len(side) >= 1
    assert side[0].path.endswith(":generateContent")
    assert side[0].body["generationConfig"]["responseMimeType"] == "application/json"
    assert len(model_server.turn_requests()) == 1
    assert model_server.requests_of("exhausted") == []
