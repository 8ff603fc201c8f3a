"""The app-server codec, driven the way the recorded client drove the real CLI.

Each ``c2s`` message of a transcript is re-issued through the codec's command
API (so request ids line up and our lines can be compared with what the real
CLI accepted); each ``s2c`` message is fed to ``receive_line``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest

from chorus.bodies import PermissionAnswer
from chorus.bodies.codex import (
    MODE_POLICIES,
    ApprovalRequest,
    AppServerCodec,
    AutoReply,
    Inbound,
    RpcResponse,
    mode_policy,
)
from chorus.events import (
    ErrorCode,
    Event,
    FileChange,
    Notice,
    PermissionDecision,
    PermissionRequest,
    Plan,
    RetryNotice,
    SessionStarted,
    StatusChanged,
    Steer,
    TextDelta,
    Thinking,
    ToolCall,
    ToolOutputDelta,
    ToolResult,
    TurnCompleted,
    TurnFailed,
    Unknown,
    Usage,
    UsageUpdate,
)

TRANSCRIPTS = Path(__file__).resolve().parents[2] / "transcripts" / "codex"

_MODES = {
    ("never", "danger-full-access"): "bypassPermissions",
    ("untrusted", "workspace-write"): "default",
}
_DECISIONS = {
    "accept": PermissionAnswer.allow(),
    "decline": PermissionAnswer.deny("no"),
    "cancel": PermissionAnswer("deny", extra={"interrupt": True}),
}

T = TypeVar("T")


@dataclass
class Replay:
    """A transcript replayed through one codec."""

    codec: AppServerCodec
    items: list[Inbound] = field(default_factory=list)
    #: (recorded c2s message, the line our codec produced for it)
    sent: list[tuple[dict[str, Any], str]] = field(default_factory=list)
    #: prompt of each turn/start -> index in ``items`` where its output begins
    marks: dict[str, int] = field(default_factory=dict)
    approvals: dict[int | str, ApprovalRequest] = field(default_factory=dict)

    @property
    def events(self) -> list[Event]:
        return [
            i for i in self.items if not isinstance(i, RpcResponse | ApprovalRequest | AutoReply)
        ]

    def turn(self, prompt: str) -> list[Event]:
        """The events of the turn started with ``prompt``, up to its terminal event."""
        out: list[Event] = []
        for item in self.items[self.marks[prompt] :]:
            if isinstance(item, RpcResponse | ApprovalRequest | AutoReply):
                continue
            out.append(item)
            if isinstance(item, TurnCompleted | TurnFailed):
                return out
        raise AssertionError(f"turn {prompt!r} has no terminal event")

    def send(self, msg: dict[str, Any]) -> None:
        self.sent.append((msg, self._issue(msg)))

    def _issue(self, msg: dict[str, Any]) -> str:
        method, params = msg.get("method"), msg.get("params") or {}
        codec = self.codec
        if method is None:  # our answer to a server request
            answer = _DECISIONS[msg["result"]["decision"]]
            return codec.answer(self.approvals[msg["id"]], answer)[0]
        if method == "initialized":
            return codec.initialized()
        if method == "initialize":
            return codec.initialize(experimental_api=True).line
        if method == "thread/start":
            mode = _MODES[(params["approvalPolicy"], params["sandbox"])]
            return codec.thread_start(cwd=params["cwd"], mode=mode).line
        if method == "thread/resume":
            cwd = "/work/demo/codex/run_app/w"
            return codec.thread_resume(params["threadId"], cwd=cwd, mode="bypassPermissions").line
        if method == "turn/start":
            prompt = params["input"][0]["text"]
            self.marks[prompt] = len(self.items)
            return codec.turn_start(prompt).line
        if method == "turn/interrupt":
            request = codec.turn_interrupt()
            assert request is not None
            return request.line
        raise AssertionError(f"unexpected client message {msg}")

    def receive(self, msg: dict[str, Any]) -> None:
        for item in self.codec.receive_line(json.dumps(msg)):
            self.items.append(item)
            if isinstance(item, ApprovalRequest):
                self.approvals[item.request_id] = item


def replay(name: str) -> Replay:
    result = Replay(AppServerCodec(client_name="recorder"))
    for raw in (TRANSCRIPTS / name).read_text(encoding="utf-8").splitlines():
        record = json.loads(raw)
        if record["dir"] == "c2s":
            result.send(record["msg"])
        elif record["dir"] == "s2c":
            result.receive(record["msg"])
    return result


@pytest.fixture(scope="module")
def main() -> Replay:
    return replay("transcript_app_server.jsonl")


def only(events: list[Event], kind: type[T]) -> list[T]:
    return [e for e in events if isinstance(e, kind)]


# -- our requests match what the real CLI accepted ---------------------------------------


def test_request_ids_and_params_match_the_recorded_client(main: Replay) -> None:
    for recorded, line in main.sent:
        ours = json.loads(line)
        assert "jsonrpc" not in ours  # the server sends none; we mirror it
        assert ours.get("id") == recorded.get("id")
        assert ours.get("method") == recorded.get("method")
        if recorded.get("method") in ("thread/start", "turn/start", "turn/interrupt"):
            # Every recorded param is sent the same way (we may add more).
            for key, value in recorded["params"].items():
                sent = ours["params"][key]
                if key == "input":
                    assert sent[0]["text"] == value[0]["text"]
                else:
                    assert sent == value


def test_approval_answers_are_the_recorded_wire_decisions(main: Replay) -> None:
    answers = [(r, json.loads(line)) for r, line in main.sent if "result" in r]
    assert [a["result"] for _, a in answers] == [r["result"] for r, _ in answers]
    assert [a["result"]["decision"] for _, a in answers] == ["accept", "decline", "cancel"]


def test_every_recorded_server_line_is_understood() -> None:
    """Schema validation accepts every real line: nothing falls back to Unknown."""
    for name in (
        "transcript_app_server.jsonl",
        "transcript_app_server_retries.jsonl",
        "transcript_app_server_cmd_output.jsonl",
    ):
        unknown = only(replay(name).events, Unknown)
        assert unknown == [], f"{name}: {[u.raw[:80] for u in unknown]}"


# -- a full turn ----------------------------------------------------------------------


def test_session_started_comes_from_the_thread_start_result(main: Replay) -> None:
    started = only(main.events, SessionStarted)[0]
    assert started.native_session_id == "01a202b7-ea29-73d1-8a29-2d621106d294"
    assert started.model == "gpt-5.5"
    assert started.body_version == "0.169.0"
    assert started.cwd == "/work/demo/codex/run_app/w"
    assert started.permission_mode == "bypassPermissions"


def test_full_turn_maps_reasoning_command_patch_and_text(main: Replay) -> None:
    events = main.turn("FULL: make out.txt")
    kinds = [type(e).__name__ for e in events if not isinstance(e, StatusChanged | UsageUpdate)]
    assert kinds == [
        "Thinking",
        "Thinking",
        "Thinking",
        "ToolCall",
        "ToolResult",
        "ToolCall",
        "FileChange",
        "ToolResult",
        "TextDelta",
        "TextDelta",
        "Text",
        "TurnCompleted",
    ]
    thinking = only(events, Thinking)
    assert [t.delta for t in thinking] == [True, True, False]
    assert thinking[-1].text == "**Planning** I will create out.txt with a shell command."
    shell, edit = only(events, ToolCall)
    assert (shell.tool, shell.native_tool) == ("shell", "commandExecution")
    assert shell.input["command"] == "/bin/bash -lc 'echo hello > out.txt'"
    assert (edit.tool, edit.native_tool) == ("edit", "fileChange")
    change = only(events, FileChange)[0]
    assert change.path.endswith("/notes.txt")
    assert (change.kind, change.diff, change.call_id) == (
        "add",
        "written by apply_patch\n",
        edit.call_id,
    )
    shell_result, edit_result = only(events, ToolResult)
    assert (shell_result.call_id, shell_result.exit_code, shell_result.is_error) == (
        shell.call_id,
        0,
        False,
    )
    assert edit_result.status == "completed"
    assert "".join(d.text for d in only(events, TextDelta)) == "done"
    done = events[-1]
    assert isinstance(done, TurnCompleted)
    assert done.result == "done"
    assert done.turn_id == "01a202b7-ea42-70f0-af94-1e0391c69813"
    assert all(e.turn_id == done.turn_id for e in events)


def test_cumulative_thread_usage_becomes_per_call_increments(main: Replay) -> None:
    events = main.turn("FULL: make out.txt")
    steps = only(events, UsageUpdate)
    # Three model calls at 100/20 each; the thread totals were 120, 240, 360.
    assert [(u.usage.input_tokens, u.usage.output_tokens) for u in steps] == [(100, 20)] * 3
    done = events[-1]
    assert isinstance(done, TurnCompleted)
    assert done.usage == Usage(input_tokens=300, output_tokens=60)
    assert done.duration_ms is not None
    assert done.duration_ms > 0


def test_resumed_thread_counts_only_its_new_turn(main: Replay) -> None:
    started = only(main.events, SessionStarted)
    assert started[-1].native_session_id == "01a202b7-ea29-73d1-8a29-2d621106d294"
    done = main.turn("RUN: echo resumed >> out.txt")[-1]
    assert isinstance(done, TurnCompleted)
    # The restored totals (300/60) arrive before the turn and are not this turn's spend.
    assert done.usage == Usage(input_tokens=200, output_tokens=40)


# -- interrupt, approvals ------------------------------------------------------------------


def test_interrupted_turn_fails_with_interrupted(main: Replay) -> None:
    events = main.turn("SLOW please")
    assert [d.text for d in only(events, TextDelta)] == ["tick 0 ", "tick 1 "]
    done = events[-1]
    assert isinstance(done, TurnFailed)
    assert done.error.code == ErrorCode.INTERRUPTED
    assert done.terminal_reason == "interrupted"
    assert main.codec.turn_interrupt() is None  # no turn left to interrupt


def test_accepted_command_approval(main: Replay) -> None:
    events = main.turn("RUN: echo accept > approved.txt")
    request = only(events, PermissionRequest)[0]
    call = only(events, ToolCall)[0]
    assert (request.tool, request.native_tool, request.call_id) == (
        "shell",
        "commandExecution",
        call.call_id,
    )
    assert request.input["command"] == "/bin/bash -lc 'echo accept > approved.txt'"
    assert request.request_id == "0"
    assert only(events, StatusChanged)[1].detail == {"activeFlags": ["waitingOnApproval"]}
    result = only(events, ToolResult)[0]
    assert (result.status, result.exit_code) == ("completed", 0)
    assert isinstance(events[-1], TurnCompleted)


def test_declined_command_approval_continues_the_turn(main: Replay) -> None:
    events = main.turn("RUN: echo decline > declined.txt")
    result = only(events, ToolResult)[0]
    assert (result.status, result.is_error) == ("declined", True)
    assert isinstance(events[-1], TurnCompleted)


def test_cancelled_approval_interrupts_the_turn(main: Replay) -> None:
    events = main.turn("RUN: echo cancel > cancelled.txt")
    last = events[-1]
    assert isinstance(last, TurnFailed)
    assert last.error.code == ErrorCode.INTERRUPTED


def test_permission_decision_is_built_by_answer() -> None:
    codec = AppServerCodec()
    approval = _command_approval(codec)
    line, decision = codec.answer(approval, PermissionAnswer("allow", scope="session"))
    assert json.loads(line) == {"id": 7, "result": {"decision": "acceptForSession"}}
    assert isinstance(decision, PermissionDecision)
    assert (decision.request_id, decision.decision, decision.source) == ("7", "allow", "callback")
    with pytest.raises(KeyError):
        codec.answer(approval, PermissionAnswer.allow())  # answered once only


# -- errors --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("prompt", "code", "status"),
    [
        ("QUOTA please", ErrorCode.QUOTA_EXHAUSTED, None),
        ("RATE_LIMIT please", ErrorCode.RATE_LIMITED, 429),
        ("USAGE_LIMIT please", ErrorCode.QUOTA_EXHAUSTED, None),
        ("FAIL500 please", ErrorCode.SERVER_ERROR, None),
        ("AUTH401 please", ErrorCode.AUTH, 401),
        ("CTX400 please", ErrorCode.CONTEXT_OVERFLOW, None),
        ("STREAMFAIL please", ErrorCode.NETWORK, None),
    ],
)
def test_failed_turns_get_stable_codes(
    main: Replay, prompt: str, code: ErrorCode, status: int | None
) -> None:
    events = main.turn(prompt)
    failed = events[-1]
    assert isinstance(failed, TurnFailed)
    assert failed.error.code == code
    assert failed.error.http_status == status
    assert failed.error.retryable == (
        code in (ErrorCode.RATE_LIMITED, ErrorCode.SERVER_ERROR, ErrorCode.NETWORK)
    )
    assert failed.error.native is not None
    assert "codexErrorInfo" in failed.error.native
    assert only(events, StatusChanged)[-1].state == "systemError"


def test_quota_and_rate_limit_differ_in_the_structured_signal(main: Replay) -> None:
    quota = main.turn("QUOTA please")[-1]
    rate = main.turn("RATE_LIMIT please")[-1]
    assert isinstance(quota, TurnFailed)
    assert isinstance(rate, TurnFailed)
    assert quota.error.native is not None
    assert rate.error.native is not None
    assert quota.error.native["codexErrorInfo"] == "usageLimitExceeded"
    assert rate.error.native["codexErrorInfo"] == {
        "responseTooManyFailedAttempts": {"httpStatusCode": 429}
    }


def test_compaction_inside_a_turn_is_a_notice(main: Replay) -> None:
    events = main.turn("STREAMFAIL please")
    assert [n.kind for n in only(events, Notice)] == ["compaction"]
    failed = events[-1]
    assert isinstance(failed, TurnFailed)
    assert failed.usage == Usage(input_tokens=100, output_tokens=20)  # the compaction call


def test_retries_become_retry_notices_before_the_failure() -> None:
    retries = replay("transcript_app_server_retries.jsonl")
    rate = retries.turn("RATE_LIMIT please")
    notices = only(rate, RetryNotice)
    assert [(n.attempt, n.max_retries) for n in notices] == [(i, 5) for i in range(1, 6)]
    assert {n.error.code for n in notices} == {ErrorCode.RATE_LIMITED}
    assert {n.error.http_status for n in notices} == {429}
    final = rate[-1]
    assert isinstance(final, TurnFailed)
    assert final.error.code == ErrorCode.RATE_LIMITED
    server = retries.turn("FAIL500 please")
    assert {n.error.code for n in only(server, RetryNotice)} == {ErrorCode.SERVER_ERROR}
    quota = retries.turn("QUOTA please")
    assert only(quota, RetryNotice) == []
    assert isinstance(quota[-1], TurnFailed)
    assert quota[-1].error.code == ErrorCode.QUOTA_EXHAUSTED


def test_live_command_output_and_failed_exit_code() -> None:
    run = replay("transcript_app_server_cmd_output.jsonl")
    events = run.turn("RUN: echo line1; sleep 1; echo line2; exit 4")
    call = only(events, ToolCall)[0]
    deltas = only(events, ToolOutputDelta)
    assert [(d.call_id, d.text) for d in deltas] == [
        (call.call_id, "line1\n"),
        (call.call_id, "line2\n"),
    ]
    result = only(events, ToolResult)[0]
    assert (result.output, result.exit_code, result.status, result.is_error) == (
        "line1\nline2\n",
        4,
        "failed",
        True,
    )


def test_config_warning_is_a_notice(main: Replay) -> None:
    warning = only(main.events, Notice)[0]
    assert warning.kind == "warning"
    assert "bubblewrap" in warning.message


# -- protocol edges (synthetic lines) ----------------------------------------------------


def _started(codec: AppServerCodec, thread: str = "T1", turn: str = "U1") -> None:
    """Put ``codec`` into a running turn without a transcript."""
    codec.thread_id = thread
    codec.receive_line(
        json.dumps(
            {
                "method": "turn/started",
                "params": {
                    "threadId": thread,
                    "turn": {"id": turn, "items": [], "status": "inProgress"},
                },
            }
        )
    )
    assert codec.turn_id == turn


def _command_approval(codec: AppServerCodec) -> ApprovalRequest:
    _started(codec)
    line = {
        "id": 7,
        "method": "item/commandExecution/requestApproval",
        "params": {
            "threadId": "T1",
            "turnId": "U1",
            "itemId": "c1",
            "startedAtMs": 1,
            "command": "ls",
            "cwd": "/w",
        },
    }
    request, approval = codec.receive_line(json.dumps(line))
    assert isinstance(request, PermissionRequest)
    assert isinstance(approval, ApprovalRequest)
    return approval


def test_garbage_and_unknown_methods_are_unknown_events() -> None:
    codec = AppServerCodec()
    (bad,) = codec.receive_line("not json")
    assert isinstance(bad, Unknown)
    assert bad.raw == "not json"
    raw = json.dumps({"method": "brand/new/thing", "params": {"x": 1}})
    (new,) = codec.receive_line(raw)
    assert isinstance(new, Unknown)
    assert (new.raw, new.native_type) == (raw, "brand/new/thing")


def test_a_known_notification_that_fails_validation_is_kept_raw() -> None:
    codec = AppServerCodec()
    _started(codec)
    raw = json.dumps(
        {"method": "item/agentMessage/delta", "params": {"threadId": "T1", "turnId": "U1"}}
    )
    (event,) = codec.receive_line(raw)
    assert isinstance(event, Unknown)
    assert event.native_type == "item/agentMessage/delta"


def test_bookkeeping_notifications_are_dropped() -> None:
    codec = AppServerCodec()
    for method in ("serverRequest/resolved", "thread/readState/changed", "turn/diff/updated"):
        assert codec.receive_line(json.dumps({"method": method, "params": {}})) == []


def test_other_threads_do_not_end_our_turn() -> None:
    codec = AppServerCodec()
    _started(codec)
    line = {
        "method": "turn/completed",
        "params": {"threadId": "SUBAGENT", "turn": {"id": "X", "items": [], "status": "completed"}},
    }
    (event,) = codec.receive_line(json.dumps(line))
    assert isinstance(event, Unknown)
    assert codec.turn_id == "U1"


def test_unhandled_server_requests_are_refused_not_ignored() -> None:
    codec = AppServerCodec()
    raw = json.dumps({"id": 3, "method": "item/tool/requestUserInput", "params": {}})
    unknown, reply = codec.receive_line(raw)
    assert isinstance(unknown, Unknown)
    assert unknown.raw == raw
    assert isinstance(reply, AutoReply)
    assert json.loads(reply.line) == {
        "id": 3,
        "error": {"code": -32601, "message": "Chorus does not handle item/tool/requestUserInput"},
    }


def test_file_change_approval_carries_the_changes_announced_by_its_item() -> None:
    codec = AppServerCodec()
    _started(codec)
    item = {
        "type": "fileChange",
        "id": "p1",
        "status": "inProgress",
        "changes": [{"path": "/w/a.txt", "kind": {"type": "add"}, "diff": "hi\n"}],
    }
    codec.receive_line(
        json.dumps(
            {
                "method": "item/started",
                "params": {"threadId": "T1", "turnId": "U1", "startedAtMs": 1, "item": item},
            }
        )
    )
    ask = {
        "id": 0,
        "method": "item/fileChange/requestApproval",
        "params": {"threadId": "T1", "turnId": "U1", "itemId": "p1", "startedAtMs": 1},
    }
    request, approval = codec.receive_line(json.dumps(ask))
    assert isinstance(request, PermissionRequest)
    assert isinstance(approval, ApprovalRequest)
    assert approval.is_edit
    assert approval.ask.paths == ("/w/a.txt",)
    assert request.input["changes"] == [{"path": "/w/a.txt", "kind": "add", "diff": "hi\n"}]
    line, _ = codec.answer(approval, PermissionAnswer.deny("no edits"))
    assert json.loads(line)["result"] == {"decision": "decline"}


def test_legacy_approvals_use_review_decisions_with_the_reason() -> None:
    codec = AppServerCodec()
    _started(codec)
    exec_ask = {
        "id": "a",
        "method": "execCommandApproval",
        "params": {
            "conversationId": "T1",
            "callId": "c9",
            "command": ["rm", "-rf", "x"],
            "cwd": "/w",
            "parsedCmd": [],
        },
    }
    request, approval = codec.receive_line(json.dumps(exec_ask))
    assert isinstance(request, PermissionRequest)
    assert isinstance(approval, ApprovalRequest)
    assert request.input["command"] == "rm -rf x"
    line, _ = codec.answer(approval, PermissionAnswer.deny("not today"))
    assert json.loads(line) == {
        "id": "a",
        "result": {"decision": {"denied": {"rejection": "not today"}}},
    }
    patch_ask = {
        "id": "b",
        "method": "applyPatchApproval",
        "params": {
            "conversationId": "T1",
            "callId": "c10",
            "fileChanges": {"/w/n.txt": {"type": "add", "content": "x"}},
        },
    }
    _, approval = codec.receive_line(json.dumps(patch_ask))
    assert isinstance(approval, ApprovalRequest)
    assert approval.ask.paths == ("/w/n.txt",)
    line, _ = codec.answer(approval, PermissionAnswer.allow())
    assert json.loads(line)["result"] == {"decision": "approved"}


def test_steer_needs_a_running_turn_and_echoes_a_steer_event() -> None:
    codec = AppServerCodec()
    with pytest.raises(LookupError):
        codec.turn_steer("more")
    _started(codec)
    request = codec.turn_steer("also do X")
    sent = json.loads(request.line)
    assert sent["method"] == "turn/steer"
    assert sent["params"] == {
        "threadId": "T1",
        "expectedTurnId": "U1",
        "input": [{"type": "text", "text": "also do X"}],
    }
    steer, response = codec.receive_line(json.dumps({"id": request.id, "result": {"turnId": "U1"}}))
    assert isinstance(steer, Steer)
    assert (steer.text, steer.native, steer.turn_id) == (
        "also do X",
        True,
        "U1",
    )
    assert isinstance(response, RpcResponse)
    assert response.ok


def test_error_responses_are_returned_not_raised() -> None:
    codec = AppServerCodec()
    request = codec.thread_resume("missing", cwd="/w", mode="default")
    error = {"code": -32600, "message": "no rollout found for thread id missing"}
    (response,) = codec.receive_line(json.dumps({"id": request.id, "error": error}))
    assert isinstance(response, RpcResponse)
    assert not response.ok
    assert response.method == "thread/resume"
    assert "no rollout" in response.error_message


@pytest.mark.parametrize("mode", sorted(MODE_POLICIES))
def test_permission_modes_map_to_policy_and_sandbox(mode: str) -> None:
    codec = AppServerCodec()
    policy = MODE_POLICIES[mode]
    start = json.loads(codec.thread_start(cwd="/w", mode=mode, model="m1").line)["params"]
    assert start == {
        "cwd": "/w",
        "model": "m1",
        "approvalPolicy": policy.approval_policy,
        "sandbox": policy.sandbox,
    }
    codec.thread_id = "T1"
    turn = json.loads(codec.turn_start("hi", model="m2", mode=mode).line)["params"]
    assert turn["approvalPolicy"] == policy.approval_policy
    assert (
        turn["sandboxPolicy"]["type"]
        == {
            "read-only": "readOnly",
            "workspace-write": "workspaceWrite",
            "danger-full-access": "dangerFullAccess",
        }[policy.sandbox]
    )
    assert turn["model"] == "m2"
    assert codec.model == "m2"


def test_mode_table_is_the_documented_one() -> None:
    assert {
        m: (p.approval_policy, p.sandbox, p.auto_accept_edits) for m, p in MODE_POLICIES.items()
    } == {
        "default": ("untrusted", "workspace-write", False),
        "acceptEdits": ("untrusted", "workspace-write", True),
        "plan": ("untrusted", "read-only", False),
        "bypassPermissions": ("never", "danger-full-access", False),
    }


def test_plan_updates_and_rate_limit_snapshots() -> None:
    codec = AppServerCodec()
    _started(codec)
    plan = {
        "method": "turn/plan/updated",
        "params": {
            "threadId": "T1",
            "turnId": "U1",
            "plan": [
                {"step": "read", "status": "completed"},
                {"step": "write", "status": "inProgress"},
            ],
        },
    }
    (event,) = codec.receive_line(json.dumps(plan))
    assert isinstance(event, Plan)
    assert [(e.content, e.status) for e in event.entries] == [
        ("read", "completed"),
        ("write", "inProgress"),
    ]
    empty = {
        "method": "account/rateLimits/updated",
        "params": {"rateLimits": {"limitId": "codex", "primary": None}},
    }
    assert codec.receive_line(json.dumps(empty)) == []

    def snapshot(used: int, reached: str | None) -> StatusChanged:
        window = {"usedPercent": used, "resetsAt": 1795345000, "windowDurationMins": 300}
        limits = {"limitId": "codex", "primary": window, "rateLimitReachedType": reached}
        line = {"method": "account/rateLimits/updated", "params": {"rateLimits": limits}}
        (status,) = codec.receive_line(json.dumps(line))
        assert isinstance(status, StatusChanged)
        assert status.detail is not None
        assert status.detail["primary"]["resetsAt"] == 1795345000
        return status

    assert snapshot(40, None).state == "rate_limits"
    assert snapshot(100, "rate_limit_reached").state == ErrorCode.RATE_LIMITED
    assert snapshot(100, "workspace_owner_credits_depleted").state == ErrorCode.QUOTA_EXHAUSTED


def test_a_shrinking_total_is_a_reset_not_negative_usage() -> None:
    codec = AppServerCodec()
    _started(codec)

    def usage(total: int, last: int) -> str:
        def breakdown(n: int) -> dict[str, int]:
            return {
                "totalTokens": n,
                "inputTokens": n,
                "cachedInputTokens": 0,
                "outputTokens": 0,
                "reasoningOutputTokens": 0,
            }

        return json.dumps(
            {
                "method": "thread/tokenUsage/updated",
                "params": {
                    "threadId": "T1",
                    "turnId": "U1",
                    "tokenUsage": {"total": breakdown(total), "last": breakdown(last)},
                },
            }
        )

    (first,) = codec.receive_line(usage(500, 500))
    (after_reset,) = codec.receive_line(usage(40, 40))
    assert isinstance(first, UsageUpdate)
    assert isinstance(after_reset, UsageUpdate)
    assert (first.usage.input_tokens, after_reset.usage.input_tokens) == (500, 40)
    assert codec.receive_line(usage(40, 40)) == []  # a repeated total is no new spend


def test_a_limit_failure_carries_the_accounts_reset_time() -> None:
    """The last rate-limit snapshot rides on a quota failure: the router reads its
    full window's ``resetsAt`` as the provider's cooldown."""
    from chorus.router._reset import reset_time

    codec = AppServerCodec()
    _started(codec)
    window = {"usedPercent": 100, "resetsAt": 1795345000, "windowDurationMins": 300}
    limits = {"limitId": "codex", "primary": window, "rateLimitReachedType": None}
    codec.receive_line(
        json.dumps({"method": "account/rateLimits/updated", "params": {"rateLimits": limits}})
    )
    error = {"message": "Quota exceeded.", "codexErrorInfo": "usageLimitExceeded"}
    turn = {"id": "U1", "items": [], "status": "failed", "error": error}
    line = {"method": "turn/completed", "params": {"threadId": "T1", "turn": turn}}
    (failed,) = codec.receive_line(json.dumps(line))
    assert isinstance(failed, TurnFailed)
    assert failed.error.code == ErrorCode.QUOTA_EXHAUSTED
    assert failed.error.native is not None
    assert failed.error.native["rate_limits"]["primary"]["resetsAt"] == 1795345000
    assert reset_time(failed.error, 1795340000) == 1795345000


def test_a_turn_that_sets_a_mode_keeps_the_policy_s_extra_roots_writable() -> None:
    """the per-turn sandboxPolicy replaces the thread's; the policy's allowed
    paths besides cwd stay writable in the workspace sandbox, and nowhere else."""
    codec = AppServerCodec()
    codec.writable_roots = ("/srv/shared",)
    codec.thread_id = "T1"
    turn = json.loads(codec.turn_start("hi", mode="default").line)["params"]
    assert turn["sandboxPolicy"] == {"type": "workspaceWrite", "writableRoots": ["/srv/shared"]}
    assert turn["approvalPolicy"] == "untrusted"
    plan = json.loads(codec.turn_start("hi", mode="plan").line)["params"]
    assert plan["sandboxPolicy"] == {"type": "readOnly"}
    assert plan["approvalPolicy"] == "untrusted"  # unknown commands ask Chorus, even in plan


def test_inside_chorus_sandbox_codex_nests_no_workspace_sandbox_of_its_own() -> None:
    """``contained``: Chorus's OS sandbox holds the CLI, so the modes that would run
    each command in Codex's workspace sandbox run it unsandboxed by Codex (the
    approval policy is the same: Codex still asks Chorus); plan keeps read-only."""
    codec = AppServerCodec()
    codec.contained = True
    start = json.loads(codec.thread_start(cwd="/w", mode="default").line)["params"]
    assert (start["sandbox"], start["approvalPolicy"]) == ("danger-full-access", "untrusted")
    codec.thread_id = "T1"
    for mode in ("default", "acceptEdits"):
        turn = json.loads(codec.turn_start("hi", mode=mode).line)["params"]
        assert turn["sandboxPolicy"] == {"type": "dangerFullAccess"}
        assert turn["approvalPolicy"] == "untrusted"
    plan = json.loads(codec.turn_start("hi", mode="plan").line)["params"]
    assert plan["sandboxPolicy"] == {"type": "readOnly"}
    assert mode_policy("acceptEdits", contained=True).auto_accept_edits
    assert mode_policy("default").sandbox == "workspace-write"  # not contained: as before
