"""The ``codex exec --json`` codec, fed the real CLI's raw stdout lines."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TypeVar

import pytest

from chorus.bodies.codex import ExecCodec, rollout_wanted
from chorus.events import (
    ErrorCode,
    Event,
    FileChange,
    Notice,
    Plan,
    RetryNotice,
    SessionStarted,
    Text,
    Thinking,
    ToolCall,
    ToolResult,
    TurnCompleted,
    TurnFailed,
    Unknown,
    Usage,
    UsageUpdate,
)

TRANSCRIPTS = Path(__file__).resolve().parents[2] / "transcripts" / "codex"

T = TypeVar("T")


def lines(name: str) -> list[str]:
    return (TRANSCRIPTS / name).read_text(encoding="utf-8").splitlines()


def run(codec: ExecCodec, name: str) -> list[Event]:
    codec.begin_run(model="gpt-5.5", permission_mode="bypassPermissions")
    return [e for line in lines(name) for e in codec.receive_line(line)]


def feed(name: str) -> list[Event]:
    return run(ExecCodec(), name)


def only(events: list[Event], kind: type[T]) -> list[T]:
    return [e for e in events if isinstance(e, kind)]


def test_command_turn() -> None:
    codec = ExecCodec()
    events = run(codec, "transcript_exec.jsonl")
    kinds = [type(e).__name__ for e in events]
    assert kinds == [
        "SessionStarted",
        "ToolCall",
        "ToolResult",
        "Text",
        "UsageUpdate",
        "TurnCompleted",
    ]
    started = only(events, SessionStarted)[0]
    assert started.native_session_id == "01a202b6-af2b-7421-bc47-431b9f17ef9f"
    assert codec.thread_id == started.native_session_id
    call = only(events, ToolCall)[0]
    assert (call.tool, call.native_tool, call.call_id) == ("shell", "command_execution", "item_0")
    assert call.input == {"command": "/bin/bash -lc 'echo hello > out.txt'"}
    result = only(events, ToolResult)[0]
    assert (result.call_id, result.exit_code, result.is_error) == ("item_0", 0, False)
    done = events[-1]
    assert isinstance(done, TurnCompleted)
    assert done.result == "done"
    assert done.usage == Usage(input_tokens=200, output_tokens=40)
    assert all(e.body == "codex-exec" for e in events)
    assert codec.terminal_seen


def test_full_turn_with_reasoning_and_file_change() -> None:
    events = feed("transcript_exec_full.jsonl")
    assert only(events, Thinking)[0].text.startswith("**Planning**")
    edit = only(events, ToolCall)[1]
    assert (edit.tool, edit.native_tool) == ("edit", "file_change")
    change = only(events, FileChange)[0]
    assert (change.path, change.kind, change.call_id) == (
        "/work/demo/codex/run/w3/notes.txt",
        "add",
        "item_2",
    )
    assert only(events, Text)[0].text == "done"


def test_failed_command_is_an_error_result_but_the_turn_completes() -> None:
    events = feed("transcript_exec_failed_cmd.jsonl")
    result = only(events, ToolResult)[0]
    assert (result.exit_code, result.status, result.is_error, result.output) == (
        3,
        "failed",
        True,
        "err\nout\n",
    )
    assert isinstance(events[-1], TurnCompleted)


def test_cumulative_usage_becomes_per_turn_across_resumes() -> None:
    codec = ExecCodec()
    first = run(codec, "transcript_exec.jsonl")[-1]
    assert isinstance(first, TurnCompleted)
    # Simulate the resumes continuing that thread (the recorded totals: 400/80, 600/120).
    second = run(codec, "transcript_exec_resume_id.jsonl")[-1]
    third = run(codec, "transcript_exec_resume_last.jsonl")[-1]
    assert isinstance(second, TurnCompleted)
    assert isinstance(third, TurnCompleted)
    assert second.usage == Usage(input_tokens=200, output_tokens=40)
    assert third.usage == Usage(input_tokens=200, output_tokens=40)


def test_a_body_resuming_a_foreign_thread_cannot_split_its_first_total() -> None:
    codec = ExecCodec(resumed=True)
    first = run(codec, "transcript_exec_resume_id.jsonl")
    assert only(first, UsageUpdate) == []
    done = first[-1]
    assert isinstance(done, TurnCompleted)
    assert done.usage is None  # 400/80 includes turns we never saw
    second = run(codec, "transcript_exec_resume_last.jsonl")[-1]
    assert isinstance(second, TurnCompleted)
    assert second.usage == Usage(input_tokens=200, output_tokens=40)


def test_a_resumed_thread_is_announced_once() -> None:
    codec = ExecCodec()
    run(codec, "transcript_exec_resume_id.jsonl")
    again = run(codec, "transcript_exec_resume_last.jsonl")
    assert only(again, SessionStarted) == []


@pytest.mark.parametrize(
    ("name", "code", "status"),
    [
        ("transcript_exec_err_RATE_LIMIT_noretry.jsonl", ErrorCode.RATE_LIMITED, 429),
        ("transcript_exec_err_QUOTA_noretry.jsonl", ErrorCode.QUOTA_EXHAUSTED, None),
        ("transcript_exec_err_USAGE_LIMIT_noretry.jsonl", ErrorCode.QUOTA_EXHAUSTED, None),
        ("transcript_exec_err_FAIL500_noretry.jsonl", ErrorCode.SERVER_ERROR, None),
        ("transcript_exec_err_AUTH401_defaultretry.jsonl", ErrorCode.AUTH, 401),
        ("transcript_exec_err_CTX400_noretry.jsonl", ErrorCode.CONTEXT_OVERFLOW, None),
        ("transcript_exec_err_STREAMFAIL_defaultretry.jsonl", ErrorCode.NETWORK, None),
        ("transcript_exec_err_missing_key.jsonl", ErrorCode.AUTH, None),
        ("transcript_exec_err_connrefused_bounded.jsonl", ErrorCode.NETWORK, None),
    ],
)
def test_failures_are_classified_from_text(name: str, code: ErrorCode, status: int | None) -> None:
    failed = feed(name)[-1]
    assert isinstance(failed, TurnFailed)
    assert failed.error.code == code
    assert failed.error.http_status == status
    assert failed.terminal_reason == "failed"


def test_reconnecting_errors_are_retry_notices_not_failures() -> None:
    events = feed("transcript_exec_err_RATE_LIMIT_defaultretry.jsonl")
    notices = only(events, RetryNotice)
    assert [(n.attempt, n.max_retries) for n in notices] == [(i, 5) for i in range(1, 6)]
    assert {n.error.code for n in notices} == {ErrorCode.RATE_LIMITED}
    assert len(only(events, TurnFailed)) == 1
    server = only(feed("transcript_exec_err_FAIL500_defaultretry.jsonl"), RetryNotice)
    assert {n.error.code for n in server} == {ErrorCode.SERVER_ERROR}


def test_unbounded_reconnecting_has_no_attempt_count_and_the_kill_is_a_crash() -> None:
    codec = ExecCodec()
    events = run(codec, "transcript_exec_err_connrefused_default.jsonl")
    notices = only(events, RetryNotice)
    assert [(n.attempt, n.max_retries, n.error.code) for n in notices] == [
        (0, None, ErrorCode.NETWORK)
    ] * 3
    assert not codec.terminal_seen
    (ended,) = codec.finish(-15, "", interrupted=False)
    assert isinstance(ended, TurnFailed)
    assert ended.error.code == ErrorCode.BODY_CRASHED


def test_finish_after_a_terminal_line_adds_nothing() -> None:
    codec = ExecCodec()
    run(codec, "transcript_exec_err_QUOTA_noretry.jsonl")
    assert codec.finish(1, "", interrupted=False) == []


def test_finish_explains_a_silent_exit() -> None:
    codec = ExecCodec()
    codec.begin_run(model=None, permission_mode=None)
    stderr = (TRANSCRIPTS / "transcript_exec_resume_bad_id.stderr.txt").read_text()
    (missing,) = codec.finish(1, stderr, interrupted=False)
    assert isinstance(missing, TurnFailed)
    assert missing.error.code == ErrorCode.SESSION_NOT_FOUND
    codec.begin_run(model=None, permission_mode=None)
    (interrupted,) = codec.finish(1, "", interrupted=True)
    assert isinstance(interrupted, TurnFailed)
    assert interrupted.error.code == ErrorCode.INTERRUPTED
    codec.begin_run(model=None, permission_mode=None)
    (silent,) = codec.finish(0, "", interrupted=False)
    assert isinstance(silent, TurnFailed)
    assert silent.error.code == ErrorCode.BODY_PROTOCOL


def test_error_items_are_warnings_and_garbage_is_unknown() -> None:
    events = feed("transcript_exec_unknown_model.jsonl")
    warning = only(events, Notice)[0]
    assert warning.kind == "warning"
    assert "fake-model" in warning.message
    codec = ExecCodec()
    (bad,) = codec.receive_line("Reading additional input from stdin...")
    assert isinstance(bad, Unknown)
    (new,) = codec.receive_line('{"type":"turn.paused"}')
    assert isinstance(new, Unknown)
    assert new.native_type == "turn.paused"


def test_todo_lists_become_plans() -> None:
    codec = ExecCodec()
    todo = {"text": "a", "completed": True}, {"text": "b", "completed": False}
    item = {"id": "item_3", "type": "todo_list", "items": list(todo)}
    (plan,) = codec.receive_line(json.dumps({"type": "item.updated", "item": item}))
    assert isinstance(plan, Plan)
    assert [(e.content, e.status) for e in plan.entries] == [("a", "completed"), ("b", "pending")]


def test_calls_exec_leaves_out_come_from_codex_rollout() -> None:
    """A sandbox-blocked command and a rejected patch print no item; the rollout lines
    the body feeds (in recorded order) make them events; reported calls stay single."""
    events = feed("transcript_exec_rollout.jsonl")
    calls = only(events, ToolCall)
    assert [(c.tool, c.native_tool) for c in calls] == [
        ("shell", "command_execution"),
        ("shell", "exec_command"),
        ("edit", "apply_patch"),
    ]
    assert calls[1].input == {"command": "cat secret"}
    assert calls[2].input["changes"] == [{"path": "/var/tmp/chorus-outside.txt", "kind": "add"}]
    results = {r.call_id: r for r in only(events, ToolResult)}
    denied = results[calls[1].call_id]
    assert (denied.exit_code, denied.is_error) == (1, True)
    assert "Permission denied" in denied.output
    rejected = results[calls[2].call_id]
    assert rejected.is_error
    assert rejected.output.startswith("patch rejected")
    kinds = [type(e).__name__ for e in events]
    assert kinds.index("ToolResult", kinds.index("ToolCall", 3)) < kinds.index("TurnCompleted")


def test_a_rollout_call_without_output_is_reported_before_the_turn_ends() -> None:
    codec = ExecCodec()
    codec.begin_run(model=None, permission_mode=None)
    call = {"type": "function_call", "name": "exec_command", "call_id": "call_1",
            "arguments": json.dumps({"cmd": "sleep 9", "workdir": "/w"})}  # fmt: skip
    assert codec.receive_line(json.dumps({"type": "response_item", "payload": call})) == []
    events = codec.receive_line('{"type":"turn.completed","usage":{}}')
    first = events[0]
    assert isinstance(first, ToolCall)
    assert first.input == {"command": "sleep 9", "workdir": "/w"}
    assert isinstance(events[-1], TurnCompleted)


@pytest.mark.parametrize(
    ("line", "wanted"),
    [
        ('{"type":"response_item","payload":{"type":"function_call","call_id":"c"}}', True),
        ('{"type":"response_item","payload":{"type":"custom_tool_call_output"}}', True),
        ('{"type":"response_item","payload":{"type":"message","role":"developer"}}', False),
        (
            '{"type":"event_msg","payload":{"type":"item_completed","item":{"type":"FileChange"}}}',
            True,
        ),
        (
            '{"type":"event_msg","payload":{"type":"item_completed","item":{"type":"AgentMessage"}}}',
            False,
        ),
        ('{"type":"event_msg","payload":{"type":"token_count"}}', False),
        ('{"type":"session_meta","payload":{}}', False),
        ("TOKEN=secret", False),
        ("[1, 2]", False),
    ],
)
def test_only_the_rollout_lines_about_tools_are_kept(line: str, wanted: bool) -> None:
    assert rollout_wanted(line) is wanted
