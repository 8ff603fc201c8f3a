"""``chorus-codex app-server --listen stdio://`` driven by the official ``openai-codex`` SDK
(``Codex``, ``CodexClient``) with a real Claude body behind the daemon (offline)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from openai_codex import Codex, CodexConfig, InvalidParamsError, MethodNotFoundError, Sandbox
from openai_codex.client import CodexClient
from openai_codex.generated.v2_all import (
    ConfigWarningNotification,
    ItemCompletedNotification,
    ListMcpServerStatusResponse,
    ThreadStartResponse,
    TurnCompletedNotification,
    TurnStartResponse,
    TurnStatus,
)

from chorus.events import Steer, TextDelta, ToolCall, ToolResult, TurnCompleted, TurnFailed, Usage
from chorus.fronts import CodexCodec, parse_codex_argv
from chorus.fronts._codex import CodexArgs, UsageError
from chorus.policy import AuditLog
from chorus.testing import shell, slow_text, text, tool_call

if TYPE_CHECKING:
    from conftest import FrontHome

pytestmark = [
    pytest.mark.e2e,
    # openai-codex 0.163.0's CodexClient.close() never closes the child's stdout/stderr.
    pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning"),
]

CHORUS_CODEX = str(Path(sys.executable).with_name("chorus-codex"))


def _config(home: FrontHome, body: str) -> CodexConfig:
    return CodexConfig(
        codex_bin=CHORUS_CODEX,
        config_overrides=(f"chorus_body={body}",),
        cwd=str(home.work),
        env=home.env,
    )


def test_codex_sdk_runs_a_shell_turn_and_an_interrupt_on_claude(shared_front: FrontHome) -> None:
    work = shared_front.work
    shared_front.server.script(
        [
            shell("echo from the codex sdk > made.txt"),
            text("made it"),
            slow_text("a b c d e f g h i j k l m n o p", chunks=40, delay=0.25),
            text("after the interrupt"),
        ]
    )
    with Codex(_config(shared_front, "claude")) as codex:
        thread = codex.thread_start(cwd=str(work), sandbox=Sandbox.full_access)
        result = thread.run("make made.txt")
        assert result.status == TurnStatus.completed
        assert result.final_response == "made it"
        assert (work / "made.txt").read_text().strip() == "from the codex sdk"
        kinds = [item.root.type for item in result.items]
        assert "commandExecution" in kinds
        command = next(i.root for i in result.items if i.root.type == "commandExecution")
        assert "made.txt" in command.command
        assert result.usage is not None
        assert result.usage.total.output_tokens > 0

        handle = thread.turn("count slowly")
        deltas = 0
        status = None
        for note in handle.stream():
            if note.method == "item/agentMessage/delta":
                deltas += 1
                if deltas == 2:
                    handle.interrupt()
            if isinstance(note.payload, TurnCompletedNotification):
                status = note.payload.turn.status
        assert status == TurnStatus.interrupted

        again = thread.run("still there?")
        assert again.final_response == "after the interrupt"
        thread_id = thread.id
    events = asyncio.run(shared_front.log(thread_id))
    assert {e.body for e in events if e.body} == {"claude"}
    calls = [e for e in events if isinstance(e, ToolCall)]
    assert calls
    assert calls[0].tool == "shell"
    assert any(isinstance(e, ToolResult) for e in events)
    ends = [type(e).__name__ for e in events if isinstance(e, TurnCompleted | TurnFailed)]
    assert ends == ["TurnCompleted", "TurnFailed", "TurnCompleted"]


def test_thread_instructions_reach_a_claude_body(shared_front: FrontHome) -> None:
    """``thread_start(base_instructions=..., developer_instructions=...)``: a Claude body
    takes the base one as its whole system prompt and the developer one after it,
    with Chorus's context."""
    shared_front.server.script([text("ok")])
    with Codex(_config(shared_front, "claude")) as codex:
        thread = codex.thread_start(
            cwd=str(shared_front.work),
            base_instructions="You are BASE-PERSONA-5521.",
            developer_instructions="Prefer DEV-RULE-8812.",
        )
        assert thread.run("hello").final_response == "ok"
        thread_id = thread.id
    system = json.dumps(shared_front.server.turn_requests()[0].body["system"])
    assert "You are BASE-PERSONA-5521." in system
    assert system.index("Prefer DEV-RULE-8812.") < system.index("# Context from Chorus")
    # Replaced, not added to: Claude Code's own prompt is gone (its one-line
    # identity and billing blocks stay: the CLI always sends them).
    assert "You are an agent working with the user toward their goals" not in system
    events = asyncio.run(shared_front.log(thread_id))
    assert not [e for e in events if e.type == "compatibility_warning"]


def test_a_steer_and_a_resumed_thread(shared_front: FrontHome) -> None:
    """On a Codex body (a Claude body has no steer: the client gets a JSON-RPC error)."""
    shared_front.server.script(
        [slow_text("a b c d e f g h i j k l", chunks=24, delay=0.25), *[text("ok")] * 3]
    )
    with Codex(_config(shared_front, "codex")) as codex:
        thread = codex.thread_start(cwd=str(shared_front.work))
        handle = thread.turn("count slowly")
        steered = None
        for note in handle.stream():
            if note.method == "item/agentMessage/delta" and steered is None:
                steered = handle.steer("and then say ok")
        assert steered is not None
        assert steered.turn_id == handle.id
        thread_id = thread.id
    with Codex(_config(shared_front, "codex")) as codex:
        resumed = codex.thread_resume(thread_id)
        assert resumed.id == thread_id
        result = resumed.run("back again")
        assert result.final_response == "ok"
    events = asyncio.run(shared_front.log(thread_id))
    assert [e.text for e in events if isinstance(e, Steer)] == ["and then say ok"]
    assert sum(isinstance(e, TurnCompleted) for e in events) >= 2


def test_approval_requests_reach_the_low_level_client(front_home: FrontHome) -> None:
    front_home.asks_go_to_the_client()
    front_home.server.script(
        [shell("rm -rf keep"), shell("rm -rf junk"), text("kept one, removed one")]
    )
    asked: list[tuple[str, dict[str, Any]]] = []

    def decide(method: str, params: dict[str, Any] | None) -> dict[str, Any]:
        asked.append((method, params or {}))
        return {"decision": "decline" if "keep" in str(params) else "accept"}

    with CodexClient(_config(front_home, "claude"), approval_handler=decide) as client:
        client.initialize()
        thread = client.thread_start({"cwd": str(front_home.work), "approvalPolicy": "untrusted"})
        turn = client.turn_start(thread.thread.id, "tidy up")
        done = client.wait_for_turn_completed(turn.turn.id)
    assert done.turn.status == TurnStatus.completed
    assert [method for method, _ in asked] == ["item/commandExecution/requestApproval"] * 2
    assert asked[0][1]["command"] == "rm -rf keep"
    assert asked[0][1]["turnId"] == turn.turn.id
    assert (front_home.work / "keep" / "file.txt").exists()
    assert not (front_home.work / "junk").exists()
    audit = [e.data for e in AuditLog().entries() if e.kind == "permission_decision"]
    assert [a["decision"] for a in audit if a["source"] == "brain"] == ["deny", "allow"]


@pytest.mark.parametrize("body", ["claude", "codex", "gemini"])
def test_approvals_are_asked_where_codex_asks(shared_front: FrontHome, body: str) -> None:
    """``approvalPolicy: untrusted``, default policy: ``codex app-server`` asks about a
    command unless it only reads; so does the Codex front, on every body."""
    shared_front.server.script(
        [
            shell("ls"),
            shell("echo one > one.txt"),
            shell("echo two > two.txt"),
            text("done"),
            *([text("heard why")] if body == "gemini" else []),  # the denial's follow-up
        ]
    )
    asked: list[dict[str, Any]] = []

    def decide(method: str, params: dict[str, Any] | None) -> dict[str, Any]:
        asked.append(params or {})
        return {"decision": "decline" if "two" in str(params) else "accept"}

    with CodexClient(_config(shared_front, body), approval_handler=decide) as client:
        client.initialize()
        thread = client.thread_start({"cwd": str(shared_front.work), "approvalPolicy": "untrusted"})
        turn = client.turn_start(thread.thread.id, "write")
        done = client.wait_for_turn_completed(turn.turn.id)
    assert done.turn.status == TurnStatus.completed
    # Gemini's denial follow-up is part of the turn: it ends after that request
    assert len(shared_front.server.turn_requests()) == (5 if body == "gemini" else 4)
    assert [params["command"] for params in asked] == ["echo one > one.txt", "echo two > two.txt"]
    assert (shared_front.work / "one.txt").read_text().strip() == "one"
    assert not (shared_front.work / "two.txt").exists()


def test_thread_mcp_servers_reach_the_body_and_are_listed(front_home: FrontHome) -> None:
    """``config.mcp_servers``: the stdio server runs in a Claude body (its tool's result
    reaches the model), a URL one is refused with a ``configWarning``, and
    ``mcpServerStatus/list`` answers for both."""
    work = front_home.work
    (front_home.home / "policy.toml").write_text(
        'version = 1\n[mcp]\nallowed_servers = ["probe"]\n'
    )
    script = work / "probe_mcp.py"
    script.write_text(Path(__file__).with_name("probe_mcp.py").read_text())
    front_home.server.script(
        [tool_call("mcp__probe__lookup_code", {"name": "apple"}), text("looked it up")]
    )
    servers = {
        "probe": {"command": sys.executable, "args": [str(script)]},
        "remote": {"url": "http://127.0.0.1:9/mcp"},
    }
    with CodexClient(_config(front_home, "claude")) as client:
        client.initialize()
        params = {"cwd": str(work), "sandbox": "danger-full-access"}
        thread = client.thread_start({**params, "config": {"mcp_servers": servers}})
        turn = client.turn_start(thread.thread.id, "look it up")
        done = client.wait_for_turn_completed(turn.turn.id)
        listed = client.request(
            "mcpServerStatus/list",
            {"threadId": thread.thread.id},
            response_model=ListMcpServerStatusResponse,
        )
        warnings = []
        while not warnings:
            note = client.next_notification()
            if isinstance(note.payload, ConfigWarningNotification):
                warnings.append(note.payload.summary)
    assert done.turn.status == TurnStatus.completed
    assert "probe code of apple: 4417" in json.dumps(front_home.server.turn_requests()[1].body)
    status = {entry.name: entry for entry in listed.data}
    assert set(status) == {"probe", "remote"}
    assert status["remote"].tools_error is not None
    assert "stdio" in status["remote"].tools_error
    assert "'remote'" in warnings[0]


def test_low_level_client_errors_keep_the_server_serving(shared_front: FrontHome) -> None:
    shared_front.server.script([text("still serving")])
    with CodexClient(_config(shared_front, "claude")) as client:
        client.initialize()
        with pytest.raises(MethodNotFoundError):
            client.request("thread/teleport", {}, response_model=TurnStartResponse)
        thread = client.thread_start({"cwd": str(shared_front.work)})
        turn = client.turn_start(thread.thread.id, "hello")
        done = client.wait_for_turn_completed(turn.turn.id)
        assert done.turn.status == TurnStatus.completed
    with CodexClient(_config(shared_front, "nosuch")) as client:
        client.initialize()
        with pytest.raises(InvalidParamsError, match="nosuch"):
            client.thread_start({"cwd": str(shared_front.work)})


def test_bad_command_lines_exit_2() -> None:
    for argv in (["exec", "hi"], ["app-server", "--listen", "ws://127.0.0.1:1"], []):
        run = subprocess.run([CHORUS_CODEX, *argv], capture_output=True, text=True, timeout=30)
        assert run.returncode == 2, argv
        assert "chorus-codex" in run.stderr
    version = subprocess.run([CHORUS_CODEX, "--version"], capture_output=True, text=True)
    assert version.returncode == 0
    assert "0.1" in version.stdout


def test_argv_and_body_choice() -> None:
    argv = ["--config", "chorus_body=gemini", "app-server", "--listen", "stdio://"]
    assert parse_codex_argv(argv, {"CHORUS_BODY": "codex"}).body == "gemini"
    assert parse_codex_argv(["app-server"], {"CHORUS_BODY": "codex"}).body == "codex"
    with pytest.raises(UsageError):
        parse_codex_argv(["--config", "novalue", "app-server"], {})


def test_the_codec_frames_validate_against_the_sdk_models() -> None:
    codec = CodexCodec(CodexArgs(), "/tmp")
    params: dict[str, Any] = {"method": "thread/start", "cwd": "/tmp", "sandbox": "read-only"}
    answer, _started = codec.opened("1", params, {"session_id": "s1", "body": "claude"})
    ThreadStartResponse.model_validate(answer["result"])
    thread = codec.threads["s1"]
    reply, _ = codec.turn_started("2", thread)
    TurnStartResponse.model_validate(reply["result"])
    frames = thread.on_event(TextDelta(text="hi", message_id="m", turn_id="t1"))
    frames += thread.on_event(
        ToolCall(
            call_id="c", tool="shell", native_tool="Bash", input={"command": "ls"}, turn_id="t1"
        )
    )
    frames += thread.on_event(ToolResult(call_id="c", output="x", exit_code=0, turn_id="t1"))
    frames += thread.on_event(
        TurnCompleted(result="hi", usage=Usage(output_tokens=3), turn_id="t1")
    )
    completed = [f for f in frames if f["method"] == "item/completed"]
    ItemCompletedNotification.model_validate(completed[0]["params"])
    note = TurnCompletedNotification.model_validate(frames[-1]["params"])
    assert note.turn.status == TurnStatus.completed
    assert codec.on_line("{oops").frames[0]["error"]["code"] == -32700
