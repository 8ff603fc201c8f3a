"""AcpCodec on hand-written JSON-RPC lines: framing, replies, updates, permissions.

The recorded Gemini transcripts are replayed in ``tests/bodies/gemini``; these
cases cover what Gemini never sends (plans, ``current_mode_update``, ACP
``usage``, claude-code-acp and codex-acp shapes) and the error paths.
"""

from __future__ import annotations

import json
from typing import Any, TypeVar

import pytest

from chorus.bodies import PermissionAnswer
from chorus.bodies.acp import (
    CODEX_ACP_QUIRKS,
    AcpCodec,
    AcpQuirks,
    AcpStateError,
    FileReadRequested,
    FileWriteRequested,
    Outgoing,
    PermissionRequested,
    RpcReply,
)
from chorus.events import (
    ErrorCode,
    FileChange,
    Plan,
    StatusChanged,
    TextDelta,
    Thinking,
    ToolCall,
    ToolResult,
    TurnCompleted,
    TurnFailed,
    Unknown,
)

T = TypeVar("T")
SESSION = "s-1"


def _line(**msg: Any) -> str:
    return json.dumps({"jsonrpc": "2.0", **msg})


def _update(update: dict[str, Any]) -> str:
    return _line(method="session/update", params={"sessionId": SESSION, "update": update})


def _session(codec: AcpCodec, result: dict[str, Any] | None = None) -> None:
    request_id, _ = codec.new_session("/work")
    codec.feed(_line(id=request_id, result={"sessionId": SESSION, **(result or {})}))


def _only(items: list[Any], kind: type[T]) -> T:
    found = [i for i in items if isinstance(i, kind)]
    assert len(found) == 1, items
    return found[0]


@pytest.fixture
def codec() -> AcpCodec:
    codec = AcpCodec(body="agent", clock=iter(range(100)).__next__)
    _session(codec)
    return codec


def test_commands_are_jsonrpc_lines_with_increasing_ids() -> None:
    codec = AcpCodec(quirks=AcpQuirks(read_text_file=False))
    first, init = codec.initialize()
    msg = json.loads(init)
    assert (first, msg["method"], msg["jsonrpc"]) == (1, "initialize", "2.0")
    caps = msg["params"]["clientCapabilities"]
    assert caps["fs"] == {"readTextFile": False, "writeTextFile": True}
    assert caps["terminal"] is False
    second, new = codec.new_session("/w", [{"name": "m", "command": "x", "args": [], "env": []}])
    assert second == 2
    assert json.loads(new)["params"] == {
        "cwd": "/w",
        "mcpServers": [{"name": "m", "command": "x", "args": [], "env": []}],
    }


def test_prompt_needs_a_session_and_one_turn_at_a_time() -> None:
    codec = AcpCodec()
    with pytest.raises(AcpStateError, match="no session"):
        codec.prompt("hi")
    _session(codec)
    request_id, line = codec.prompt("hi")
    assert json.loads(line)["params"] == {
        "sessionId": SESSION,
        "prompt": [{"type": "text", "text": "hi"}],
    }
    assert codec.turn_request_id == request_id
    with pytest.raises(AcpStateError, match="already running"):
        codec.prompt("again")


def test_turn_collects_text_and_acp_usage(codec: AcpCodec) -> None:
    request_id, _ = codec.prompt("hi")
    delta = codec.feed(
        _update(
            {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "hel"}}
        )
    )
    codec.feed(
        _update({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "lo"}})
    )
    usage = {
        "inputTokens": 10,
        "outputTokens": 4,
        "totalTokens": 14,
        "cachedReadTokens": 3,
        "thoughtTokens": 2,
    }
    done = _only(
        codec.feed(_line(id=request_id, result={"stopReason": "max_tokens", "usage": usage})),
        TurnCompleted,
    )
    assert isinstance(delta[0], TextDelta)
    assert delta[0].turn_id == f"prompt-{request_id}"
    assert delta[0].native_session_id == SESSION
    assert (done.result, done.stop_reason) == ("hello", "max_tokens")
    assert done.usage is not None
    assert (done.usage.input_tokens, done.usage.cached_input_tokens) == (10, 3)
    assert done.usage.reasoning_tokens == 2
    assert done.duration_ms == 1000
    assert codec.turn_request_id is None


def test_cancelled_and_error_replies_fail_the_turn(codec: AcpCodec) -> None:
    request_id, _ = codec.prompt("hi")
    cancelled = _only(
        codec.feed(_line(id=request_id, result={"stopReason": "cancelled"})), TurnFailed
    )
    assert cancelled.error.code is ErrorCode.INTERRUPTED
    request_id, _ = codec.prompt("again")
    error = {"code": -32603, "message": "Internal error", "data": {"details": "boom"}}
    failed = _only(codec.feed(_line(id=request_id, error=error)), TurnFailed)
    assert failed.error.code is ErrorCode.API_ERROR
    assert "boom" in failed.error.message
    assert failed.error.native is not None
    assert failed.error.native["rpc_code"] == -32603


def test_expired_turn_makes_a_late_reply_unknown(codec: AcpCodec) -> None:
    request_id, _ = codec.prompt("hi")
    timeout = codec.expire_turn(codec_error := _timeout())
    assert timeout is not None
    assert timeout.error == codec_error
    assert codec.expire_turn(codec_error) is None
    late = codec.feed(_line(id=request_id, result={"stopReason": "end_turn"}))
    assert _only(late, Unknown).native_type == "late_response"
    stray = codec.feed(_line(id=999, result={}))
    assert _only(stray, Unknown).native_type == "orphan_response"


def _timeout() -> Any:
    from chorus.events import ErrorInfo

    return ErrorInfo(code=ErrorCode.TIMEOUT, message="late")


@pytest.mark.parametrize(
    ("line", "native_type"),
    [
        ("not json", "non_json"),
        ("[1, 2]", "non_object"),
        (_line(result=1), "invalid_jsonrpc"),
        (_line(method="$/progress", params={}), "$/progress"),
        (_update({"sessionUpdate": "brand_new_kind", "x": 1}), "brand_new_kind"),
        (
            _update(
                {"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "old"}}
            ),
            "user_message_chunk",
        ),
        (
            _update(
                {
                    "sessionUpdate": "agent_message_chunk",
                    "content": {"type": "image", "data": "AA==", "mimeType": "image/png"},
                }
            ),
            "agent_message_chunk",
        ),
    ],
)
def test_anything_unrecognised_is_unknown_and_lossless(
    codec: AcpCodec, line: str, native_type: str
) -> None:
    unknown = _only(codec.feed(line), Unknown)
    assert (unknown.raw, unknown.native_type) == (line, native_type)


def test_replies_update_session_state() -> None:
    codec = AcpCodec()
    init_id, _ = codec.initialize()
    codec.feed(
        _line(id=init_id, result={"protocolVersion": 1, "agentCapabilities": {"loadSession": True}})
    )
    assert codec.can_load_session
    assert not AcpCodec(quirks=AcpQuirks(load_session=False)).can_load_session
    options = [
        {
            "id": "model",
            "name": "Model",
            "category": "model",
            "type": "select",
            "currentValue": "gpt-5.5",
            "options": [],
        }
    ]
    _session(
        codec,
        {
            "modes": {
                "currentModeId": "read-only",
                "availableModes": [
                    {"id": "read-only", "name": "RO"},
                    {"id": "auto", "name": "Auto"},
                ],
            },
            "configOptions": options,
        },
    )
    state = codec.state
    assert (state.session_id, state.modes, state.current_mode) == (
        SESSION,
        ("read-only", "auto"),
        "read-only",
    )
    assert (state.option_for("model"), state.current_model) == ("model", "gpt-5.5")
    set_id, line = codec.set_config_option("model", "gpt-5.4")
    assert json.loads(line)["params"] == {
        "sessionId": SESSION,
        "configId": "model",
        "value": "gpt-5.4",
    }
    changed = [{**options[0], "currentValue": "gpt-5.4"}]
    reply = _only(codec.feed(_line(id=set_id, result={"configOptions": changed})), RpcReply)
    assert reply.ok
    assert codec.state.current_model == "gpt-5.4"
    mode_id, _ = codec.set_mode("auto")
    codec.feed(_line(id=mode_id, result={}))
    assert codec.state.current_mode == "auto"
    codec.feed(_update({"sessionUpdate": "current_mode_update", "currentModeId": "read-only"}))
    assert codec.state.current_mode == "read-only"
    assert CODEX_ACP_QUIRKS.mode_aliases["bypassPermissions"] == "full-access"


def test_plan_thought_and_status_updates(codec: AcpCodec) -> None:
    plan = _only(
        codec.feed(
            _update(
                {
                    "sessionUpdate": "plan",
                    "entries": [
                        {"content": "write tests", "priority": "high", "status": "in_progress"},
                        {"content": "ship", "priority": "low", "status": "pending"},
                    ],
                }
            )
        ),
        Plan,
    )
    assert [(e.content, e.status, e.priority) for e in plan.entries] == [
        ("write tests", "in_progress", "high"),
        ("ship", "pending", "low"),
    ]
    thought = _only(
        codec.feed(
            _update(
                {"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": "hmm"}}
            )
        ),
        Thinking,
    )
    assert (thought.text, thought.delta) == ("hmm", True)
    mode = _only(
        codec.feed(_update({"sessionUpdate": "current_mode_update", "currentModeId": "plan"})),
        StatusChanged,
    )
    assert (mode.state, mode.detail) == ("mode", {"mode": "plan", "source": "current_mode_update"})
    usage = _only(
        codec.feed(_update({"sessionUpdate": "usage_update", "used": 120, "size": 1000})),
        StatusChanged,
    )
    assert usage.state == "context_usage"
    assert usage.detail is not None
    assert (usage.detail["used"], usage.detail["size"]) == (120, 1000)
    empty = codec.feed(
        _update({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": ""}})
    )
    assert empty == []


def test_tool_call_lifecycle_with_diff_and_raw_output(codec: AcpCodec) -> None:
    start = codec.feed(
        _update(
            {
                "sessionUpdate": "tool_call",
                "toolCallId": "c1",
                "title": "Edit a.py",
                "kind": "edit",
                "status": "pending",
                "rawInput": {"path": "/work/a.py"},
            }
        )
    )
    call = _only(start, ToolCall)
    assert (call.tool, call.native_tool, call.input) == ("edit", "edit", {"path": "/work/a.py"})
    progress = _only(
        codec.feed(
            _update(
                {"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "in_progress"}
            )
        ),
        StatusChanged,
    )
    assert progress.state == "tool_call"
    done = codec.feed(
        _update(
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": "c1",
                "status": "completed",
                "content": [
                    {"type": "diff", "path": "/work/a.py", "oldText": "a\n", "newText": "b\n"},
                    {"type": "content", "content": {"type": "text", "text": "edited"}},
                ],
                "rawOutput": {"exit_code": 0},
            }
        )
    )
    change = _only(done, FileChange)
    assert (change.path, change.kind, change.call_id) == ("/work/a.py", "modify", "c1")
    assert change.diff is not None
    assert "-a\n+b\n" in change.diff
    result = _only(done, ToolResult)
    assert (result.output, result.exit_code, result.is_error) == ("edited", 0, False)
    again = codec.feed(
        _update({"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "completed"})
    )
    assert not any(isinstance(e, ToolResult) for e in again)


def test_update_for_an_unseen_call_first_yields_the_call(codec: AcpCodec) -> None:
    events = codec.feed(
        _update(
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": "c9",
                "status": "failed",
                "kind": "execute",
                "title": "make",
                "rawOutput": {"aggregated_output": "no rule", "exit_code": 2},
            }
        )
    )
    assert [type(e) for e in events] == [ToolCall, ToolResult]
    call, result = events
    assert isinstance(call, ToolCall)
    assert (call.tool, call.input) == ("shell", {"title": "make", "command": "make"})
    assert isinstance(result, ToolResult)
    assert (result.is_error, result.output, result.exit_code) == (True, "no rule", 2)


def test_streamed_input_re_announces_the_call_once(codec: AcpCodec) -> None:
    meta = {"claudeCode": {"toolName": "Bash"}}
    first = _only(
        codec.feed(
            _update(
                {
                    "sessionUpdate": "tool_call",
                    "toolCallId": "t1",
                    "title": "Terminal",
                    "kind": "execute",
                    "rawInput": {},
                    "_meta": meta,
                }
            )
        ),
        ToolCall,
    )
    second = _only(
        codec.feed(
            _update(
                {
                    "sessionUpdate": "tool_call",
                    "toolCallId": "t1",
                    "title": "`ls`",
                    "kind": "execute",
                    "rawInput": {"command": "ls"},
                    "_meta": meta,
                }
            )
        ),
        ToolCall,
    )
    assert (first.native_tool, first.tool, first.input) == ("Bash", "shell", {})
    assert (second.native_tool, second.input) == ("Bash", {"command": "ls"})
    third = codec.feed(
        _update(
            {
                "sessionUpdate": "tool_call",
                "toolCallId": "t1",
                "title": "`ls -l`",
                "kind": "execute",
                "rawInput": {"command": "ls -l"},
            }
        )
    )
    assert not any(isinstance(e, ToolCall) for e in third)


def _permission(request_id: int, options: list[dict[str, str]]) -> str:
    return _line(
        id=request_id,
        method="session/request_permission",
        params={
            "sessionId": SESSION,
            "options": options,
            "toolCall": {
                "toolCallId": "run_shell_command__1",
                "title": "rm x",
                "kind": "execute",
                "status": "pending",
            },
        },
    )


ALL_OPTIONS = [
    {"optionId": "always", "name": "Always", "kind": "allow_always"},
    {"optionId": "once", "name": "Once", "kind": "allow_once"},
    {"optionId": "no", "name": "No", "kind": "reject_once"},
    {"optionId": "never", "name": "Never", "kind": "reject_always"},
]


@pytest.mark.parametrize(
    ("options", "answer", "outcome"),
    [
        (ALL_OPTIONS, PermissionAnswer.allow(), {"outcome": "selected", "optionId": "once"}),
        (
            ALL_OPTIONS,
            PermissionAnswer("allow", scope="session"),
            {"outcome": "selected", "optionId": "always"},
        ),
        (ALL_OPTIONS, PermissionAnswer.deny("no"), {"outcome": "selected", "optionId": "no"}),
        (ALL_OPTIONS[:2], PermissionAnswer.deny("no"), {"outcome": "cancelled"}),
        (
            ALL_OPTIONS[3:],
            PermissionAnswer.deny("no"),
            {"outcome": "selected", "optionId": "never"},
        ),
        (ALL_OPTIONS[:1], PermissionAnswer.allow(), {"outcome": "selected", "optionId": "always"}),
    ],
)
def test_permission_option_is_chosen_by_kind(
    codec: AcpCodec,
    options: list[dict[str, str]],
    answer: PermissionAnswer,
    outcome: dict[str, str],
) -> None:
    items = codec.feed(_permission(7, options))
    asked = _only(items, PermissionRequested)
    # Without the Gemini quirk the id's prefix is not taken as the tool name.
    assert (asked.request_id, asked.ask.tool, asked.ask.native_tool) == (7, "shell", "execute")
    answered = codec.answer_permission(7, answer)
    assert answered is not None
    line, events = answered
    assert json.loads(line) == {"jsonrpc": "2.0", "id": 7, "result": {"outcome": outcome}}
    assert events[0].type == "permission_decision"
    assert codec.answer_permission(7, answer) is None


def test_cancel_answers_open_permissions_cancelled(codec: AcpCodec) -> None:
    codec.prompt("hi")
    codec.feed(_permission(3, ALL_OPTIONS))
    answers = codec.cancel_permissions("turn cancelled")
    assert [json.loads(line)["result"] for line, _ in answers] == [
        {"outcome": {"outcome": "cancelled"}}
    ]
    assert codec.pending_permissions == ()
    assert json.loads(codec.cancel()) == {
        "jsonrpc": "2.0",
        "method": "session/cancel",
        "params": {"sessionId": SESSION},
    }


def test_agent_requests_become_typed_items(codec: AcpCodec) -> None:
    read = _only(
        codec.feed(
            _line(
                id=1,
                method="fs/read_text_file",
                params={"sessionId": SESSION, "path": "/w/a", "line": 2, "limit": 3},
            )
        ),
        FileReadRequested,
    )
    assert (read.path, read.line, read.limit) == ("/w/a", 2, 3)
    write = _only(
        codec.feed(
            _line(
                id="w",
                method="fs/write_text_file",
                params={"sessionId": SESSION, "path": "/w/b", "content": "x"},
            )
        ),
        FileWriteRequested,
    )
    assert (write.request_id, write.content) == ("w", "x")
    bad = _only(codec.feed(_line(id=2, method="fs/read_text_file", params={"path": 3})), Outgoing)
    assert json.loads(bad.line)["error"]["code"] == -32602
    terminal = codec.feed(_line(id=3, method="terminal/create", params={}))
    assert json.loads(_only(terminal, Outgoing).line)["error"]["code"] == -32601
    no_read = AcpCodec(quirks=AcpQuirks(read_text_file=False))
    refused = no_read.feed(
        _line(id=4, method="fs/read_text_file", params={"sessionId": SESSION, "path": "/w/a"})
    )
    assert json.loads(_only(refused, Outgoing).line)["error"]["code"] == -32601


def test_history_replayed_by_session_load_is_not_new_output() -> None:
    codec = AcpCodec()
    load_id, line = codec.load_session("old-session", "/work")
    assert json.loads(line)["params"] == {
        "sessionId": "old-session",
        "cwd": "/work",
        "mcpServers": [],
    }
    chunk = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "hi"}}
    replayed = _only(codec.feed(_update(chunk)), StatusChanged)
    assert (replayed.state, replayed.detail) == ("history", {"update": chunk})
    codec.feed(_line(id=load_id, result={}))
    assert codec.session_id == "old-session"
    assert isinstance(codec.feed(_update(chunk))[0], TextDelta)
