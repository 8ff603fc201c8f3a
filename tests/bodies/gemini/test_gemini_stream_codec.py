"""GeminiStreamCodec on every recorded ``gemini -p ... -o stream-json`` stdout."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from chorus.bodies.gemini import GeminiStreamCodec, exit_error, status_for_exit
from chorus.events import (
    ErrorCode,
    ErrorInfo,
    FileChange,
    Notice,
    Plan,
    SessionStarted,
    Text,
    TextDelta,
    ToolCall,
    ToolResult,
    TurnCompleted,
    TurnFailed,
    Unknown,
)

TRANSCRIPTS = Path(__file__).resolve().parents[2] / "transcripts" / "gemini"
pytestmark = pytest.mark.skipif(not TRANSCRIPTS.is_dir(), reason="recorded transcripts missing")


def _run(name: str, codec: GeminiStreamCodec | None = None) -> tuple[GeminiStreamCodec, list[Any]]:
    codec = codec or GeminiStreamCodec(cwd="/work/demo/gemini/ws")
    codec.start_turn()
    events: list[Any] = []
    for line in (TRANSCRIPTS / name).read_text().split("\n"):
        if line:
            events += codec.feed(line)
    return codec, events


def _of(events: list[Any], kind: type) -> list[Any]:
    return [e for e in events if isinstance(e, kind)]


def test_shell_turn() -> None:
    codec, events = _run("transcript_stream.jsonl")
    assert [type(e).__name__ for e in events] == [
        "SessionStarted",
        "TextDelta",
        "ToolCall",
        "ToolResult",
        "TextDelta",
        "TurnCompleted",
    ]
    started = events[0]
    assert (started.model, started.native_session_id, started.cwd) == (
        "gemini-2.5-flash",
        "ec3698d5-fa5a-41dc-8ad5-da4abc6ff5db",
        "/work/demo/gemini/ws",
    )
    call = events[2]
    assert (call.tool, call.native_tool) == ("shell", "run_shell_command")
    assert call.input["command"] == "echo hello > out.txt"
    result = events[3]
    assert (result.call_id, result.is_error, result.status) == (call.call_id, False, "success")
    done = events[-1]
    assert (done.result, done.duration_ms) == ("done", 197)
    assert (done.usage.input_tokens, done.usage.output_tokens) == (200, 14)
    assert all(e.body == "gemini" and e.turn_id == "run-1" for e in events)
    assert codec.turn_done
    assert codec.finish(0, "") == []


def test_resume_keeps_the_session_and_says_no_new_start() -> None:
    codec, _ = _run("transcript_stream.jsonl")
    _, events = _run("stream_resume_latest.jsonl", codec)
    assert not _of(events, SessionStarted)
    assert "".join(e.text for e in _of(events, TextDelta)) == "Hello from the fake Gemini server."
    assert events[-1].turn_id == "run-2"
    assert events[-1].native_session_id == "ec3698d5-fa5a-41dc-8ad5-da4abc6ff5db"


def test_write_file_is_a_file_change() -> None:
    _, events = _run("stream_scenario_write.jsonl")
    change = _of(events, FileChange)[0]
    assert (change.path, change.kind) == ("/work/demo/gemini/ws_write/note.txt", "write")
    assert _of(events, ToolResult)[0].output == ""
    assert _of(events, ToolCall)[0].tool == "write"


def test_todos_are_a_plan() -> None:
    _, events = _run("stream_scenario_todo.jsonl")
    plan = _of(events, Plan)[0]
    assert [(e.content, e.status) for e in plan.entries] == [
        ("create out.txt", "in_progress"),
        ("say done", "pending"),
    ]
    assert _of(events, ToolCall)[0].tool == "todo"


@pytest.mark.parametrize("name", ["stream_scenario_read.jsonl", "stream_scenario_missing.jsonl"])
def test_tool_errors_keep_the_turn_going(name: str) -> None:
    _, events = _run(name)
    result = _of(events, ToolResult)[0]
    assert (result.is_error, result.status, result.output) == (True, "error", "File not found.")
    assert isinstance(events[-1], TurnCompleted)


def test_unregistered_tool_without_yolo() -> None:
    _, events = _run("stream_noyolo_auto_router.jsonl")
    assert events[0].model == "auto"
    result = _of(events, ToolResult)[0]
    assert result.is_error
    assert 'Tool "run_shell_command" not found' in result.output
    assert events[-1].usage.input_tokens == 230


def test_thought_is_not_shown_and_max_tokens_is_success() -> None:
    _, think = _run("stream_scenario_think.jsonl")
    assert think[-1].result == "Thought about it: done."
    _, truncated = _run("stream_scenario_maxtokens.jsonl")
    assert isinstance(truncated[-1], TurnCompleted)
    assert truncated[-1].result == "truncated"


@pytest.mark.parametrize(
    ("name", "retryable", "needle"),
    [
        ("stream_scenario_empty.jsonl", True, "empty response"),
        ("stream_scenario_safety.jsonl", False, "safety settings"),
    ],
)
def test_error_event_then_error_result_with_exit_zero(
    name: str, retryable: bool, needle: str
) -> None:
    codec, events = _run(name)
    failed = events[-1]
    assert isinstance(failed, TurnFailed)
    assert (failed.error.code, failed.error.retryable) == (ErrorCode.API_ERROR, retryable)
    assert needle in failed.error.message
    assert failed.usage is not None
    assert failed.usage.input_tokens == 400
    assert codec.finish(0, "") == []


@pytest.mark.parametrize(
    ("name", "code", "retry_after", "status"),
    [
        ("stream_429_daily_quota.jsonl", ErrorCode.QUOTA_EXHAUSTED, None, None),
        ("stream_auto_flash_429_daily.jsonl", ErrorCode.QUOTA_EXHAUSTED, None, None),
        ("stream_429_maxAttempts1.jsonl", ErrorCode.RATE_LIMITED, 1.5, None),
        ("stream_429_retryinfo_always.jsonl", ErrorCode.RATE_LIMITED, 1.5, None),
        ("stream_429_plain_always.jsonl", ErrorCode.RATE_LIMITED, None, None),
        ("stream_500_always.jsonl", ErrorCode.SERVER_ERROR, None, 500),
    ],
)
def test_api_errors_in_the_result(
    name: str, code: ErrorCode, retry_after: float | None, status: int | None
) -> None:
    _, events = _run(name)
    assert [type(e).__name__ for e in events] == ["SessionStarted", "TurnFailed"]
    error = events[-1].error
    assert (error.code, error.retry_after_s, error.http_status) == (code, retry_after, status)
    assert not error.message.startswith("[API Error")
    assert events[-1].terminal_reason == "result_error"


def test_retry_once_then_success_looks_like_success() -> None:
    _, events = _run("stream_429_retry_once_then_ok.jsonl")
    assert isinstance(events[-1], TurnCompleted)
    assert events[-1].duration_ms == 5941


def test_no_result_line_is_a_crash() -> None:
    codec = GeminiStreamCodec()
    codec.start_turn()
    codec.feed('{"type":"init","session_id":"s","model":"m"}')
    (failed,) = codec.finish(0, "some stderr")
    assert isinstance(failed, TurnFailed)
    assert failed.error.code is ErrorCode.BODY_CRASHED
    assert failed.error.native == {"exit_code": 0, "stderr_tail": "some stderr"}
    assert codec.finish(0, "") == []


def test_exit_codes_without_result() -> None:
    stderr = (TRANSCRIPTS / "stderr_429_retryinfo_always.txt").read_text()
    assert (status_for_exit(173), status_for_exit(244), status_for_exit(0)) == (429, 500, None)
    rate = exit_error(173, stderr)
    assert (rate.code, rate.http_status, rate.retry_after_s) == (ErrorCode.RATE_LIMITED, 429, 1.5)
    plain = exit_error(173, (TRANSCRIPTS / "stderr_429_plain_always.txt").read_text())
    assert (plain.code, plain.http_status) == (ErrorCode.RATE_LIMITED, 429)
    daily = exit_error(173, (TRANSCRIPTS / "text_429_daily_quota.stderr.txt").read_text())
    assert daily.code is ErrorCode.QUOTA_EXHAUSTED
    assert exit_error(244, "").code is ErrorCode.SERVER_ERROR
    assert exit_error(41, "Invalid auth method selected.").code is ErrorCode.AUTH
    # Seen live: --resume of a session whose only turn failed on quota (nothing stored).
    lost = exit_error(42, "Error resuming session: No previous sessions found for this project.")
    assert (lost.code, lost.message) == (
        ErrorCode.SESSION_NOT_FOUND,
        "Error resuming session: No previous sessions found for this project.",
    )
    assert exit_error(42, "Invalid --model value").code is ErrorCode.INVALID_REQUEST
    assert exit_error(-9, "").code is ErrorCode.BODY_CRASHED


def test_stopped_runs_end_with_the_given_reason() -> None:
    codec = GeminiStreamCodec()
    codec.start_turn()
    stop = ErrorInfo(code=ErrorCode.INTERRUPTED, message="turn interrupted")
    (failed,) = codec.finish(0, "", stopped=stop)
    assert isinstance(failed, TurnFailed)
    assert (failed.error, failed.terminal_reason) == (stop, "interrupted")


def test_odd_lines() -> None:
    codec = GeminiStreamCodec()
    codec.start_turn()
    (stray,) = codec.feed("Loaded cached credentials.")
    (newer,) = codec.feed('{"type":"telemetry","x":1}')
    assert isinstance(stray, Unknown)
    assert isinstance(newer, Unknown)
    assert (stray.native_type, newer.native_type) == ("non_json", "telemetry")
    assert isinstance(codec.feed("[]")[0], Unknown)
    notice = codec.feed('{"type":"error","severity":"warning","message":"Loop detected"}')[0]
    assert isinstance(notice, Notice)
    assert (notice.kind, notice.message) == ("warning", "Loop detected")
    whole = codec.feed('{"type":"message","role":"assistant","content":"all at once"}')[0]
    assert isinstance(whole, Text)
    assert codec.feed('{"type":"message","role":"user","content":"echo"}') == []
