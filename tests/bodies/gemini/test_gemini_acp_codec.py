"""The ACP codec on every recorded ``gemini --acp`` transcript (agent->client lines)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from chorus.bodies.acp import (
    AcpQuirks,
    FileReadRequested,
    FileWriteRequested,
    PermissionRequested,
    RpcReply,
)
from chorus.events import (
    ErrorCode,
    ErrorInfo,
    FileChange,
    PermissionDecision,
    PermissionRequest,
    StatusChanged,
    TextDelta,
    Thinking,
    ToolCall,
    ToolResult,
    TurnCompleted,
    TurnFailed,
    Unknown,
)

Replayer = Callable[..., list[Any]]


def _turn(replay: Any, request_id: int) -> list[Any]:
    return [e for e in replay.events if e.turn_id == f"prompt-{request_id}"]


def _of(events: list[Any], kind: type) -> list[Any]:
    return [e for e in events if isinstance(e, kind)]


def _text(events: list[Any]) -> str:
    return "".join(e.text for e in _of(events, TextDelta))


@pytest.fixture
def runs(replay: Replayer) -> list[Any]:
    """The two processes of the main transcript: the session, then a fresh load."""
    return replay("transcript_acp.jsonl")


@pytest.fixture
def main(runs: list[Any]) -> Any:
    return runs[0]


def test_handshake_state(main: Any) -> None:
    state = main.codec.state
    assert state.agent.agent_info.version == "0.61.0"
    assert state.agent.agent_capabilities.load_session is True
    assert main.codec.can_load_session is True  # the body renames the chat file first
    assert state.session_id == "c2f16ee8-f7ae-4d46-ae3c-77d67a58f176"
    assert state.modes == ("default", "autoEdit", "yolo", "plan")
    assert "gemini-2.5-pro" in state.models
    assert state.current_model == "gemini-2.5-pro"  # after the recorded set_model
    assert state.current_mode == "default"
    assert all(e.body == "gemini" for e in main.events)
    assert not _of(main.events, Unknown)


def test_every_prompt_ends_exactly_once(main: Any) -> None:
    prompts = range(3, 17)
    skipped = {9, 11, 12, 13}  # set_mode x3 and set_model
    for request_id in prompts:
        ends = _of(_turn(main, request_id), TurnCompleted) + _of(
            _turn(main, request_id), TurnFailed
        )
        assert len(ends) == (0 if request_id in skipped else 1), request_id


def test_shell_allowed_once(main: Any) -> None:
    events = _turn(main, 3)
    kinds = [type(e).__name__ for e in events]
    assert kinds == [
        "TextDelta",
        "ToolCall",
        "PermissionRequest",
        "PermissionDecision",
        "ToolResult",
        "TextDelta",
        "TurnCompleted",
    ]
    call = _of(events, ToolCall)[0]
    assert (call.tool, call.native_tool) == ("shell", "run_shell_command")
    assert call.input["command"] == "echo hello > out.txt"
    assert "Create out.txt containing hello" in call.input["description"]
    request = _of(events, PermissionRequest)[0]
    assert (request.request_id, request.call_id) == ("0", call.call_id)
    asked = main.all(PermissionRequested)[0]
    assert asked.ask.cwd == "/work/demo/gemini/ws_acp3"
    result = _of(events, ToolResult)[0]
    assert (result.call_id, result.status, result.is_error) == (call.call_id, "completed", False)
    done = _of(events, TurnCompleted)[0]
    assert done.usage.input_tokens == 200
    assert done.usage.output_tokens == 14
    assert done.result == "I will create out.txt.done"


def test_shell_rejected_gets_a_denied_result(main: Any) -> None:
    events = _turn(main, 4)
    assert _of(events, PermissionDecision)[0].decision == "deny"
    results = _of(events, ToolResult)
    assert len(results) == 1  # Gemini sends no update after a reject: the codec supplies it
    assert (results[0].status, results[0].is_error) == ("denied", True)
    assert _of(events, TurnCompleted)[0].stop_reason == "end_turn"


def test_new_file_write_fails_when_read_errors(main: Any) -> None:
    reads = [i for i in main.all(FileReadRequested) if i.request_id in (2, 3)]
    assert [r.path for r in reads] == ["/work/demo/gemini/ws_acp3/note.txt"] * 2
    result = _of(_turn(main, 5), ToolResult)[0]
    assert (result.status, result.is_error) == ("failed", True)
    assert result.output.startswith("Error checking existing file")
    assert not _of(_turn(main, 5), FileChange)


def test_write_over_existing_file_yields_a_file_change(main: Any) -> None:
    events = _turn(main, 6)
    request = _of(events, PermissionRequest)[0]
    assert request.tool == "write"
    assert request.input["diffs"][0]["new_text"] == "hi from fake\n"
    write = next(i for i in main.all(FileWriteRequested) if i.request_id == 7)
    assert (write.path, write.content) == ("/work/demo/gemini/ws_acp3/note.txt", "hi from fake\n")
    change = _of(events, FileChange)[0]
    assert (change.path, change.kind) == ("/work/demo/gemini/ws_acp3/note.txt", "modify")
    assert "-old content" in change.diff
    assert "+hi from fake" in change.diff
    kinds = [type(e) for e in events]
    assert kinds.index(FileChange) < kinds.index(ToolResult)


def test_read_and_thought(main: Any) -> None:
    call = _of(_turn(main, 7), ToolCall)[0]
    assert (call.tool, call.native_tool, call.input["paths"]) == (
        "read",
        "read_file",
        ["/work/demo/gemini/ws_acp3/note.txt"],
    )
    thought = _of(_turn(main, 8), Thinking)[0]
    assert thought.text == "****\nPondering the request..."
    assert _text(_turn(main, 8)) == "Thought about it: done."


def test_mode_changes_arrive_as_status_not_text(main: Any) -> None:
    modes = [e for e in _of(main.events, StatusChanged) if e.state == "mode"]
    assert [m.detail["mode"] for m in modes] == ["yolo", "default"]
    assert not any("[MODE_UPDATE]" in e.text for e in _of(main.events, TextDelta))
    assert not _of(_turn(main, 10), PermissionRequest)  # yolo: ran unasked
    bogus = next(r for r in main.all(RpcReply) if r.request_id == 12)
    assert bogus.error["data"]["details"] == "Invalid or unavailable mode: bogus"


def test_cancel_and_the_prompt_after_it(main: Any) -> None:
    cancelled = _turn(main, 15)
    assert _text(cancelled) == "tick 0 tick 1 tick 2 tick 3 tick 4 "
    failed = _of(cancelled, TurnFailed)[0]
    assert (failed.error.code, failed.terminal_reason) == (ErrorCode.INTERRUPTED, "cancelled")
    after = _turn(main, 16)
    assert _text(after) == "Hello from the fake Gemini server."
    assert _of(after, TurnCompleted)


def test_unimplemented_methods_are_rpc_errors(runs: list[Any]) -> None:
    listing = next(r for r in runs[0].all(RpcReply) if r.method == "session/list")
    assert listing.error["code"] == -32601
    load = runs[1].all(RpcReply)[-1]
    assert load.method == "session/load"
    assert load.error["data"]["details"] == "No previous sessions found for this project."


def test_allow_always_then_no_more_questions(replay: Replayer) -> None:
    (run,) = replay("acp_run1_allow_always_and_inprocess_load.jsonl")
    assert len(run.all(PermissionRequested)) == 1
    assert run.all(PermissionDecision)[0].decision == "allow"
    second = _turn(run, 4)
    assert [type(e).__name__ for e in second] == [
        "TextDelta",
        "ToolCall",
        "ToolResult",
        "TextDelta",
        "TurnCompleted",
    ]
    failed_read = _of(_turn(run, 6), ToolResult)[0]
    assert (failed_read.status, failed_read.is_error) == ("failed", True)
    mode = [e for e in _of(run.events, StatusChanged) if e.state == "mode"]
    assert mode[0].detail == {"mode": "autoEdit", "source": "message"}
    assert _of(_turn(run, 11), TurnCompleted)[0].usage.output_tokens == 7
    assert _of(_turn(run, 12), TurnFailed)[0].error.code is ErrorCode.INTERRUPTED


@pytest.mark.parametrize(
    ("name", "quirks"),
    [
        ("acp_newfile_missing_as_empty.jsonl", AcpQuirks(missing_file_as_empty=True)),
        ("acp_newfile_no_readTextFile_cap.jsonl", AcpQuirks(read_text_file=False)),
    ],
)
def test_new_file_workarounds(replay: Replayer, name: str, quirks: AcpQuirks) -> None:
    (run,) = replay(name, quirks)
    reads = run.all(FileReadRequested)
    assert len(reads) == (0 if not quirks.read_text_file else 2)
    assert run.all(FileWriteRequested)[0].content == "hi from fake\n"
    change = run.all(FileChange)[0]
    assert (change.path.endswith("ws_nf/note.txt"), change.kind) == (True, "add")
    assert run.all(ToolResult)[0].status == "completed"
    # No tool_call came first: the permission request introduced the call.
    assert run.all(ToolCall)[0].call_id == run.all(ToolResult)[0].call_id


def test_daily_quota_is_json_rpc_429(replay: Replayer) -> None:
    (run,) = replay("acp_429_daily_quota.jsonl")
    failed = run.all(TurnFailed)[0]
    assert failed.error.code is ErrorCode.QUOTA_EXHAUSTED
    assert (failed.error.http_status, failed.error.retryable) == (429, False)
    assert failed.error.native["rpc_code"] == 429
    assert failed.terminal_reason == "rpc_error"


def test_retryable_quota_is_rate_limited(replay: Replayer) -> None:
    (run,) = replay("acp_429_retryinfo_model_flash.jsonl")
    error = run.all(TurnFailed)[0].error
    assert (error.code, error.retryable, error.retry_after_s) == (
        ErrorCode.RATE_LIMITED,
        True,
        1.5,
    )


def test_silent_retries_leave_the_turn_open_for_the_deadline(replay: Replayer) -> None:
    (run,) = replay("acp_429_retryinfo_auto_timeout350s.jsonl")
    assert not run.all(TurnFailed)
    assert run.codec.turn_request_id == 3
    expired = run.codec.expire_turn(ErrorInfo(code=ErrorCode.TIMEOUT, message="deadline"))
    assert expired is not None
    assert (expired.error.code, expired.turn_id) == (ErrorCode.TIMEOUT, "prompt-3")


def test_loading_a_headless_session_fails(replay: Replayer) -> None:
    (run,) = replay("acp_load_headless_session.jsonl")
    load = run.all(RpcReply)[-1]
    assert (load.method, load.error["code"]) == ("session/load", -32603)
    assert "Invalid session identifier" in load.error["data"]["details"]
    assert run.codec.session_id is None
