"""The Claude stream-json codec, fed the real CLI's recorded transcripts."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from chorus.bodies import PermissionAnswer
from chorus.bodies.claude import ClaudeCodec
from chorus.events import (
    ControlRequestEvent,
    ControlResponseEvent,
    ErrorCode,
    Event,
    Notice,
    PermissionDecision,
    PermissionRequest,
    RetryNotice,
    SessionStarted,
    StatusChanged,
    Text,
    TextDelta,
    Thinking,
    ToolCall,
    ToolResult,
    TurnCompleted,
    TurnFailed,
    Unknown,
)

TRANSCRIPTS = Path(__file__).resolve().parents[2] / "transcripts" / "claude"
pytestmark = pytest.mark.skipif(not TRANSCRIPTS.is_dir(), reason="recorded transcripts missing")

#: Lines that carry content and must map to at least one event.
_CONTENT_TYPES = {"assistant", "user", "result", "control_response", "control_request"}


def _processes(path: Path) -> Iterator[list[tuple[str, str]]]:
    """(phase, stdout line) per CLI process; bidi files keep only ``cli->host`` messages."""
    lines: list[tuple[str, str]] = []
    for raw in path.read_text(encoding="utf-8").splitlines():
        if not path.name.startswith("transcript_bidi"):
            lines.append(("print", raw))
            continue
        entry = json.loads(raw)
        if entry["dir"] == "note" and entry["msg"].get("note") == "spawn" and lines:
            yield lines
            lines = []
        if entry["dir"] == "cli->host":
            lines.append((entry["phase"], json.dumps(entry["msg"])))
    yield lines


def _feed(path: Path) -> list[list[tuple[str, str, list[Event]]]]:
    """Every process of ``path`` through a fresh codec: (phase, line, events) triples."""
    runs = []
    for process in _processes(path):
        codec = ClaudeCodec()
        runs.append([(phase, line, codec.feed(line)) for phase, line in process])
    return runs


def _events(path: Path, process: int = 0, phase: str | None = None) -> list[Event]:
    triples = _feed(path)[process]
    return [e for p, _, events in triples if phase in (None, p) for e in events]


T = TypeVar("T")


def _one(events: list[Event], kind: type[T]) -> T:
    found = [e for e in events if isinstance(e, kind)]
    assert len(found) == 1, f"expected one {kind.__name__}, got {found}"
    return found[0]


@pytest.mark.parametrize(
    "path", sorted(TRANSCRIPTS.glob("transcript_*.jsonl")), ids=lambda p: p.name
)
def test_every_line_maps_without_unknown(path: Path) -> None:
    for process in _feed(path):
        for _, line, events in process:
            assert not [e for e in events if isinstance(e, Unknown)], line[:200]
            if json.loads(line).get("type") in _CONTENT_TYPES:
                assert events, f"content line mapped to nothing: {line[:200]}"
            assert all(e.body == "claude" for e in events)


@pytest.mark.parametrize(
    "path", sorted(TRANSCRIPTS.glob("transcript_*.jsonl")), ids=lambda p: p.name
)
def test_every_result_is_one_terminal_event(path: Path) -> None:
    for process in _feed(path):
        for _, line, events in process:
            terminal = [e for e in events if isinstance(e, TurnCompleted | TurnFailed)]
            assert len(terminal) == (1 if json.loads(line)["type"] == "result" else 0)


def test_print_turn_maps_each_line() -> None:
    events = _events(TRANSCRIPTS / "transcript_print.jsonl")
    started = _one(events, SessionStarted)
    assert (started.model, started.body_version) == ("claude-opus-5-5", "2.1.330")
    assert started.cwd == "/work/demo/claude/r_wd"
    assert "Bash" in started.tools
    assert [e.text for e in events if isinstance(e, Text)] == ["I'll create the file.", "done"]
    call = _one(events, ToolCall)
    assert (call.tool, call.native_tool) == ("shell", "Bash")
    assert call.input["command"] == "echo hello > out.txt"
    assert call.title == "Write hello to out.txt"
    result = _one(events, ToolResult)
    assert (result.call_id, result.status, result.is_error) == (call.call_id, "completed", False)
    done = _one(events, TurnCompleted)
    assert (done.result, done.stop_reason, done.num_turns, done.duration_ms) == (
        "done",
        "end_turn",
        2,
        223,
    )
    assert done.usage is not None
    assert (done.usage.input_tokens, done.usage.output_tokens) == (
        200,
        70,
    )
    assert done.cost_usd == pytest.approx(0.0022)
    assert {e.native_session_id for e in events} == {"b29ebb3c-2bff-4bec-b488-828e904f7b59"}


def _request_blocks(name: str) -> list[dict[str, Any]]:
    """Content blocks of the last request in a fake-server log (what the model saw)."""
    entries = [json.loads(raw) for raw in (TRANSCRIPTS / name).read_text().splitlines()]
    request = [e for e in entries if e["dir"] == "request"][-1]
    messages = request["body"]["messages"]
    return [b for m in messages if isinstance(m["content"], list) for b in m["content"]]


def test_print_requests_saw_the_same_tool_call_and_result() -> None:
    """The fake server's log of that run holds the call id and output the codec reported."""
    events = _events(TRANSCRIPTS / "transcript_print.jsonl")
    call, result = _one(events, ToolCall), _one(events, ToolResult)
    blocks = _request_blocks("requests_print.jsonl")
    uses = [b for b in blocks if b["type"] == "tool_use"]
    assert [(b["id"], b["name"], b["input"]) for b in uses] == [
        (call.call_id, call.native_tool, call.input)
    ]
    (sent,) = [b for b in blocks if b["type"] == "tool_result"]
    assert (sent["tool_use_id"], sent["content"]) == (call.call_id, result.output)


def test_resume_print_continues_the_print_session() -> None:
    first = _one(_events(TRANSCRIPTS / "transcript_print.jsonl"), SessionStarted)
    events = _events(TRANSCRIPTS / "transcript_resume_print.jsonl")
    assert _one(events, SessionStarted).native_session_id == first.native_session_id
    done = _one(events, TurnCompleted)
    assert done.result == "hi there"
    # total_cost_usd is cumulative across --resume; the per-turn split is not.
    assert done.cost_usd == pytest.approx(0.00068)
    history = _request_blocks("requests_resume_print.jsonl")
    call = _one(_events(TRANSCRIPTS / "transcript_print.jsonl"), ToolCall)
    assert call.call_id in [b.get("id") for b in history]


def test_old_cli_cost_comes_from_the_cumulative_total() -> None:
    done = _one(_events(TRANSCRIPTS / "transcript_print_v2.1.197.jsonl"), TurnCompleted)
    assert done.cost_usd == pytest.approx(0.00275)


def test_api_error_400_is_a_failed_turn_with_code_api_error() -> None:
    events = _events(TRANSCRIPTS / "transcript_print_api_error_400.jsonl")
    failed = _one(events, TurnFailed)
    assert failed.error.code is ErrorCode.API_ERROR
    assert (failed.error.http_status, failed.error.retryable) == (400, False)
    assert failed.error.message == "API Error: 400 fake injected error"
    assert failed.terminal_reason == "api_error"
    assert _one(events, Notice).kind == "api_error"
    assert not [e for e in events if isinstance(e, Text)]


def test_api_retry_529_gives_retry_notices_then_success() -> None:
    events = _events(TRANSCRIPTS / "transcript_print_api_retry_529.jsonl")
    retries = [e for e in events if isinstance(e, RetryNotice)]
    assert [(r.attempt, r.max_retries, r.delay_ms) for r in retries] == [
        (1, 10, 597),
        (2, 10, 1093),
    ]
    assert {(r.error.code, r.error.http_status, r.error.retryable) for r in retries} == {
        (ErrorCode.OVERLOADED, 529, True)
    }
    assert _one(events, TurnCompleted).result == "done"


BIDI = TRANSCRIPTS / "transcript_bidi.jsonl"


def test_bidi_session_started_once_per_session() -> None:
    main, resumed = _events(BIDI, 0), _events(BIDI, 1)
    started = _one(main, SessionStarted)
    assert started.model == "claude-sonnet-4-5"  # set_model came before the first turn
    assert _one(resumed, SessionStarted).native_session_id == started.native_session_id


def test_bidi_controls_answered() -> None:
    responses = [e for e in _events(BIDI, 0) if isinstance(e, ControlResponseEvent)]
    assert [r.request_id for r in responses] == [
        "req_1_1cfcb8f8",
        "req_2_276e357d",
        "req_3_d05fd64d",
        "req_4_a33cf633",
    ]
    assert all(r.ok for r in responses)
    assert responses[1].payload == {"mode": "default"}
    assert responses[3].payload == {"still_queued": []}


def test_bidi_allowed_tool() -> None:
    events = _events(BIDI, 0, "turn1_allow")
    ask = _one(events, PermissionRequest)
    call = _one(events, ToolCall)
    assert (ask.tool, ask.native_tool, ask.call_id) == ("shell", "Bash", call.call_id)
    assert ask.request_id == "00c750fe-a05b-41e4-8151-d28d871b97e8"
    assert ask.native_session_id == call.native_session_id  # filled from the confirmed session
    deltas = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert deltas == "I'll create the file.done"
    assert _one(events, ToolResult).status == "completed"
    assert _one(events, TurnCompleted).cost_usd == pytest.approx(0.00165)


def test_bidi_denied_tool() -> None:
    events = _events(BIDI, 0, "turn2_deny")
    result = _one(events, ToolResult)
    assert (result.status, result.is_error) == ("denied", True)
    assert result.output == "denied by bidi_driver test policy"
    done = _one(events, TurnCompleted)
    assert [d["tool_name"] for d in done.permission_denials] == ["Bash"]
    assert done.cost_usd == pytest.approx(0.00171)  # not the cumulative 0.00336


def test_bidi_interrupted_turn_fails_with_interrupted() -> None:
    events = _events(BIDI, 0, "turn3_interrupt")
    failed = _one(events, TurnFailed)
    assert failed.error.code is ErrorCode.INTERRUPTED
    assert failed.terminal_reason == "aborted_streaming"
    assert failed.usage is not None
    assert failed.usage.output_tokens == 3
    assert failed.cost_usd == pytest.approx(0.000345)
    assert _one(events, Text).text == "This is a "
    assert _one(events, Notice).kind == "interrupted"
    after = _one(_events(BIDI, 0, "turn4_after_interrupt"), TurnCompleted)
    assert after.result == "hi there"


def test_bidi_misc_unsupported_subtype_and_replays() -> None:
    events = _events(TRANSCRIPTS / "transcript_bidi_misc.jsonl")
    responses = {e.request_id: e for e in events if isinstance(e, ControlResponseEvent)}
    refused = responses["req_1_503c75bb"]
    assert not refused.ok
    assert refused.error is not None
    assert refused.error.code is ErrorCode.UNSUPPORTED
    assert responses["req_2_57e4a03c"].payload == {"mcpServers": []}
    assert "categories" in responses["req_3_8913fd08"].payload
    echoes = [e for e in events if isinstance(e, Notice) and e.kind == "user_message"]
    assert [e.message for e in echoes] == ["hello", "hello"]


def test_bidi_sdkenv_session_states() -> None:
    events = _events(TRANSCRIPTS / "transcript_bidi_sdkenv.jsonl")
    states = [e.state for e in events if isinstance(e, StatusChanged)]
    assert {"running", "requires_action", "idle", "requesting"} <= set(states)


# -- synthetic lines: what the transcripts do not show -------------------------------------


def test_garbage_lines_become_unknown_and_never_raise() -> None:
    codec = ClaudeCodec()
    for line in ("not json", "[1,2]", '"text"', '{"type":"brand_new"}', '{"type":"assistant"}'):
        (event,) = codec.feed(line)
        assert isinstance(event, Unknown)
        assert event.raw == line
    (event,) = codec.feed('{"type":"system","subtype":"future_thing"}')
    assert isinstance(event, Unknown)
    assert event.native_type == "system/future_thing"


def test_unknown_content_block_keeps_the_line() -> None:
    line = json.dumps(
        {"type": "assistant", "message": {"id": "m", "content": [{"type": "hologram"}]}}
    )
    (event,) = ClaudeCodec().feed(line)
    assert isinstance(event, Unknown)
    assert event.native_type == "assistant/hologram"


def test_thinking_blocks_and_deltas() -> None:
    codec = ClaudeCodec()
    delta = {"type": "content_block_delta", "delta": {"type": "thinking_delta", "thinking": "h"}}
    (partial,) = codec.feed(json.dumps({"type": "stream_event", "event": delta}))
    block = {"type": "thinking", "thinking": "hmm", "signature": "s"}
    line = {"type": "assistant", "message": {"id": "m", "content": [block]}}
    (whole,) = codec.feed(json.dumps(line))
    assert isinstance(partial, Thinking)
    assert (partial.text, partial.delta) == ("h", True)
    assert isinstance(whole, Thinking)
    assert (whole.text, whole.delta) == ("hmm", False)


def test_session_id_confirmed_only_by_init_or_result() -> None:
    codec = ClaudeCodec()
    codec.feed(json.dumps({"type": "system", "subtype": "status", "session_id": "s1"}))
    assert codec.session_id is None
    codec.feed(json.dumps({"type": "result", "is_error": False, "session_id": "s1"}))
    assert codec.session_id == "s1"


def test_failed_resume_is_session_not_found_and_not_confirmed() -> None:
    codec = ClaudeCodec()
    line = {
        "type": "result",
        "subtype": "error_during_execution",
        "is_error": True,
        "session_id": "11111111-2222-3333-4444-555555555555",
        "errors": ["No conversation found with session ID: 11111111-2222-3333-4444-555555555555"],
    }
    (event,) = codec.feed(json.dumps(line))
    assert isinstance(event, TurnFailed)
    assert event.error.code is ErrorCode.SESSION_NOT_FOUND
    assert codec.is_resume_failure(event)
    assert codec.session_id is None


def test_cost_delta_from_cumulative_totals() -> None:
    codec = ClaudeCodec()
    costs = []
    for total in (0.5, 0.75, 0.75):
        line = {"type": "result", "is_error": False, "total_cost_usd": total, "session_id": "s"}
        (event,) = codec.feed(json.dumps(line))
        assert isinstance(event, TurnCompleted)
        costs.append(event.cost_usd)
    assert costs == [pytest.approx(0.5), pytest.approx(0.25), pytest.approx(0.0)]


def test_quota_retry_banner_and_rate_limit_event() -> None:
    codec = ClaudeCodec()
    banner = {
        "type": "system",
        "subtype": "api_error",
        "retry_attempt": 1,
        "retry_in_ms": 500,
        "max_retries": 3,
        "session_id": "s",
        "error": {"message": "limit", "status": 429, "rate_limits": {"resets_at": 1}},
    }
    (retry,) = codec.feed(json.dumps(banner))
    assert isinstance(retry, RetryNotice)
    assert retry.error.code is ErrorCode.QUOTA_EXHAUSTED
    info = {"status": "rejected", "rateLimitType": "five_hour", "resetsAt": 1}
    (status,) = codec.feed(json.dumps({"type": "rate_limit_event", "rate_limit_info": info}))
    assert isinstance(status, StatusChanged)
    assert status.detail == info


def test_agent_side_denial_and_cancel() -> None:
    codec = ClaudeCodec()
    denied = {"type": "system", "subtype": "permission_denied", "tool_name": "Bash",
              "tool_use_id": "toolu_1", "decision_reason_type": "rule"}  # fmt: skip
    (decision,) = codec.feed(json.dumps(denied))
    assert isinstance(decision, PermissionDecision)
    assert (decision.decision, decision.source) == ("deny", "agent")
    assert decision.reason == "refused by Claude Code itself (rule), without asking Chorus"
    (cancel,) = codec.feed(json.dumps({"type": "control_cancel_request", "request_id": "r1"}))
    assert isinstance(cancel, ControlRequestEvent)
    assert cancel.request_id == "r1"
    assert codec.feed('{"type":"keep_alive"}') == []


# -- commands out ----------------------------------------------------------------------------


def _ask_line(request_id: str) -> str:
    request = {
        "subtype": "can_use_tool",
        "tool_name": "Write",
        "input": {"file_path": "/w/a.txt", "content": "x"},
        "tool_use_id": "toolu_9",
        "blocked_path": "/w/a.txt",
    }
    return json.dumps({"type": "control_request", "request_id": request_id, "request": request})


def test_permission_ask_and_answers() -> None:
    codec = ClaudeCodec()
    (request,) = codec.feed(_ask_line("p1"))
    assert isinstance(request, PermissionRequest)
    assert request.tool == "write"
    ask = codec.permission_ask("p1", cwd="/w")
    assert ask is not None
    assert (ask.paths, ask.cwd, ask.call_id) == (("/w/a.txt",), "/w", "toolu_9")
    allow = json.loads(codec.permission_answer("p1", PermissionAnswer.allow()).text)
    assert allow["response"] == {
        "subtype": "success",
        "request_id": "p1",
        "response": {
            "behavior": "allow",
            "updatedInput": {"file_path": "/w/a.txt", "content": "x"},
        },
    }
    assert codec.permission_ask("p1") is None  # answered once
    codec.feed(_ask_line("p2"))
    deny = json.loads(codec.permission_answer("p2", PermissionAnswer.deny("no writes")).text)
    assert deny["response"]["response"] == {"behavior": "deny", "message": "no writes"}


def test_control_requests_and_user_lines_are_single_json_lines() -> None:
    codec = ClaudeCodec()
    first, line = codec.control_request("set_model", model="claude-sonnet-4-5")
    second, _ = codec.control_request("interrupt")
    assert re.fullmatch(r"req_1_[0-9a-f]{8}", first)
    assert second.startswith("req_2_")
    assert json.loads(line.text) == {
        "type": "control_request",
        "request_id": first,
        "request": {"subtype": "set_model", "model": "claude-sonnet-4-5"},
    }
    user = codec.user_message("a\u2028b\nc")
    assert "\n" not in user.text
    assert "\u2028" not in user.text
    assert json.loads(user.text)["message"] == {"role": "user", "content": "a\u2028b\nc"}
    error = json.loads(codec.control_error("h1", "nope").text)
    assert error["response"] == {"subtype": "error", "request_id": "h1", "error": "nope"}


def test_thinking_tokens_line_is_a_thinking_status() -> None:
    # As the pinned CLI 2.1.330 writes it before a thinking block.
    line = (
        '{"type":"system","subtype":"thinking_tokens","estimated_tokens":4,'
        '"estimated_tokens_delta":4,"session_id":"09e8da10","uuid":"1027f8cd"}'
    )
    (event,) = ClaudeCodec().feed(line)
    assert isinstance(event, StatusChanged)
    assert (event.state, event.detail) == (
        "thinking",
        {"estimated_tokens": 4, "estimated_tokens_delta": 4},
    )


def test_a_local_command_s_output_is_a_plain_notice() -> None:
    """``set_model`` makes Claude Code echo ``/model``'s output wrapped in tags."""
    codec = ClaudeCodec()
    text = "<local-command-stdout>Set model to `claude-sonnet-4-5`</local-command-stdout>"
    line = {"type": "user", "message": {"role": "user", "content": text}, "session_id": "s"}
    (notice,) = codec.feed(json.dumps(line))
    assert isinstance(notice, Notice)
    assert (notice.message, notice.kind) == ("Set model to `claude-sonnet-4-5`", "command")
    block = {"type": "text", "text": "<command-name>/cost</command-name>"}
    line["message"] = {"role": "user", "content": [block]}
    (cost,) = codec.feed(json.dumps(line))
    assert isinstance(cost, Notice)
    assert cost.message == "/cost"
    line["message"] = {"role": "user", "content": "a message"}
    (plain,) = codec.feed(json.dumps(line))
    assert isinstance(plain, Notice)
    assert (plain.message, plain.kind) == ("a message", "user_message")
