"""Sans-I/O codec for ``codex app-server``: JSON-RPC lines in, canonical events out.

The codec owns no process and no event loop (it imports no asyncio). Commands
(:meth:`AppServerCodec.initialize`, :meth:`~AppServerCodec.turn_start`, ...)
return a :class:`Request` whose ``line`` the caller writes to the server's
stdin; every stdout line goes to :meth:`AppServerCodec.receive_line`, which
returns a list of :data:`Inbound` items in order:

* canonical events (``chorus.events``), to be published as they are;
* :class:`RpcResponse`, the answer to one of our requests (matched by id);
* :class:`ApprovalRequest`, a server request that needs a permission answer:
  pass it with the :class:`PermissionAnswer` to :meth:`AppServerCodec.answer`
  and write the returned line;
* :class:`AutoReply`, a line the caller must write at once (the codec's own
  refusal of a server request Chorus does not handle).

Wire facts (codex-cli 0.169.0, AGENT_CLIS.md 2.4): one JSON object per line
each way; server messages carry no ``"jsonrpc"`` field, so we send none either;
server request ids start at 0 and are independent of ours. Params we send and
the notifications we map are validated with the models generated from the
CLI's own schema (``_schema.py``); a message that fails validation becomes
:class:`Unknown` with its raw line instead of crashing the session.

Usage: ``thread/tokenUsage/updated`` is cumulative per thread. Each
:class:`UsageUpdate` carries the increment since the previous update (one
model call), so the updates of a turn add up to ``TurnCompleted.usage``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from chorus.bodies._permissions import PermissionAnswer, PermissionAsk
from chorus.bodies.codex import _schema as s
from chorus.bodies.codex._errors import classify_turn_error, make_error, parse_reconnecting
from chorus.bodies.codex._items import change_dict, tool_call_fields, tool_result_fields
from chorus.bodies.codex._policy import (
    APPROVAL_METHODS,
    BODY_NAME,
    ApprovalKind,
    decision_payload,
    mode_policy,
    permission_ask,
)
from chorus.bodies.codex._usage import UsageMeter, add, is_zero, usage_from_camel
from chorus.bodies.codex._wire import dumps, to_wire
from chorus.events import (
    ErrorCode,
    ErrorInfo,
    Event,
    FileChange,
    JsonDict,
    Notice,
    PermissionDecision,
    PermissionRequest,
    Plan,
    PlanEntry,
    RetryNotice,
    SessionStarted,
    StatusChanged,
    Steer,
    Text,
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

E = TypeVar("E", bound=BaseModel)

# -- inbound items ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Request:
    """A request we send: its id, method and the line to write."""

    id: int
    method: str
    line: str


@dataclass(frozen=True, slots=True)
class RpcResponse:
    """The server's answer to request ``id``: ``result`` or ``error`` (JSON-RPC error object)."""

    id: int | str
    method: str | None
    result: JsonDict | None = None
    error: JsonDict | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def error_message(self) -> str:
        return str((self.error or {}).get("message") or self.error)


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    """A server request asking to approve a command or a file change."""

    request_id: int | str
    method: str
    kind: ApprovalKind
    ask: PermissionAsk

    @property
    def is_edit(self) -> bool:
        return self.kind in ("file_change", "legacy_patch")


@dataclass(frozen=True, slots=True)
class AutoReply:
    """A line the codec decided on by itself (a refusal); write it at once."""

    line: str


Inbound = Event | RpcResponse | ApprovalRequest | AutoReply

#: Notifications that carry nothing a Chorus consumer needs (the same facts
#: arrive as other events, or they are UI bookkeeping). Dropped, not Unknown.
IGNORED_NOTIFICATIONS = frozenset(
    {
        "thread/started",  # SessionStarted comes from the thread/start result
        "turn/diff/updated",  # the same changes arrive as fileChange items
        "serverRequest/resolved",
        "thread/readState/changed",
        "remoteControl/status/changed",
        "thread/goal/cleared",
        "thread/goal/updated",
        "item/reasoning/summaryPartAdded",
        "thread/name/updated",
    }
)

#: Thread item types whose start or completion carries nothing more to map.
_SILENT_ITEMS = frozenset({"userMessage", "hookPrompt", "agentMessage", "reasoning"})

#: ``rateLimitReachedType`` -> the stable code of a limit that has been hit.
_LIMIT_REACHED = {
    "rate_limit_reached": ErrorCode.RATE_LIMITED,
    "workspace_owner_credits_depleted": ErrorCode.QUOTA_EXHAUSTED,
    "workspace_member_credits_depleted": ErrorCode.QUOTA_EXHAUSTED,
    "workspace_owner_usage_limit_reached": ErrorCode.QUOTA_EXHAUSTED,
    "workspace_member_usage_limit_reached": ErrorCode.QUOTA_EXHAUSTED,
}

_LIMIT_CODES = frozenset({ErrorCode.RATE_LIMITED, ErrorCode.QUOTA_EXHAUSTED})

_METHOD_NOT_FOUND = -32601


@dataclass(slots=True)
class _Pending:
    method: str
    text: str | None = None  # the steer text, echoed as a Steer event on success


@dataclass(slots=True)
class _TurnState:
    """What the codec remembers during one turn."""

    id: str
    usage: Usage = field(default_factory=Usage)
    last_text: str | None = None
    error: JsonDict | None = None
    changes: dict[str, list[JsonDict]] = field(default_factory=dict)


def _json_object(line: str) -> JsonDict:
    try:
        message = json.loads(line)
    except ValueError:
        return {}
    return message if isinstance(message, dict) else {}


def _input_text(params: JsonDict) -> str | None:
    """The text of a ``turn/steer`` (or ``turn/start``) input, if any."""
    inputs = params.get("input")
    if isinstance(inputs, list) and inputs and isinstance(inputs[0], dict):
        text = inputs[0].get("text")
        return text if isinstance(text, str) else None
    return None


def _str_or(value: Any, default: str | None) -> str | None:
    return value if isinstance(value, str) else default


class AppServerCodec:
    """One ``codex app-server`` connection's protocol state (one thread at a time).

    Not thread-safe; call it from one task. ``thread_id`` is known after the
    ``thread/start`` (``thread/resume``, ``thread/fork``) result has been fed;
    ``turn_id`` while a turn runs (from the ``turn/start`` result or
    ``turn/started``, whichever comes first, until ``turn/completed``).
    Notifications naming another thread (a sub-agent's) become :class:`Unknown`
    and never touch the current turn.
    """

    def __init__(self, *, client_name: str = "chorus", client_version: str = "0.1.0") -> None:
        self.client_name = client_name
        self.client_version = client_version
        self.thread_id: str | None = None
        self.model: str | None = None
        self.initial_model: str | None = None
        self.permission_mode: str | None = None
        #: Folders besides the thread's cwd that the workspace sandbox lets Codex write
        #: (the policy's allowed paths), sent with each ``turn/start`` that sets a mode.
        self.writable_roots: tuple[str, ...] = ()
        #: Chorus's OS sandbox holds the CLI: no workspace sandbox nested in it
        #: (:func:`mode_policy`'s ``contained``).
        self.contained = False
        self._turn: _TurnState | None = None
        self._next_id = 1
        self._pending: dict[int, _Pending] = {}
        self._approvals: dict[int | str, ApprovalRequest] = {}
        self._usage = UsageMeter()
        self._line = ""
        #: The account's last rate-limit snapshot (its windows' ``resetsAt``), kept
        #: with a limit failure so the router knows when access returns.
        self._rate_limits: JsonDict | None = None

    @property
    def turn_id(self) -> str | None:
        return self._turn.id if self._turn else None

    # -- commands ----------------------------------------------------------------

    def _request(self, method: str, params: BaseModel, *, text: str | None = None) -> Request:
        rid = self._next_id
        self._next_id += 1
        self._pending[rid] = _Pending(method, text)
        return Request(rid, method, dumps({"id": rid, "method": method, "params": to_wire(params)}))

    def initialize(self, *, experimental_api: bool = False) -> Request:
        """The ``initialize`` request; send :meth:`initialized` after its result."""
        info = s.ClientInfo(name=self.client_name, title="Chorus", version=self.client_version)
        capabilities = s.InitializeCapabilities(experimentalApi=experimental_api)
        return self._request(
            "initialize", s.InitializeParams(clientInfo=info, capabilities=capabilities)
        )

    def initialized(self) -> str:
        """The ``initialized`` notification line (no id, no answer)."""
        return dumps({"method": "initialized"})

    def thread_start(self, *, cwd: str, mode: str, model: str | None = None) -> Request:
        """``thread/start`` with the approval policy and sandbox of ``mode``."""
        policy = mode_policy(mode, contained=self.contained)
        self.permission_mode = mode
        params = s.ThreadStartParams(
            cwd=cwd, model=model, approvalPolicy=policy.approval_policy, sandbox=policy.sandbox
        )
        return self._request("thread/start", params)

    def thread_resume(
        self, thread_id: str, *, cwd: str, mode: str, model: str | None = None
    ) -> Request:
        """``thread/resume``: a new process continues ``thread_id`` (same id, history kept).

        ``excludeTurns`` skips the deprecated full-history hydration (and its
        ``deprecationNotice``); Chorus has the history in its own log.
        """
        policy = mode_policy(mode, contained=self.contained)
        self.permission_mode = mode
        params = s.ThreadResumeParams(
            threadId=thread_id,
            cwd=cwd,
            model=model,
            approvalPolicy=policy.approval_policy,
            sandbox=policy.sandbox,
            excludeTurns=True,
        )
        return self._request("thread/resume", params)

    def thread_fork(
        self, thread_id: str, *, cwd: str, mode: str, model: str | None = None
    ) -> Request:
        """``thread/fork``: a new thread that starts with ``thread_id``'s history."""
        policy = mode_policy(mode, contained=self.contained)
        self.permission_mode = mode
        params = s.ThreadForkParams(
            threadId=thread_id,
            cwd=cwd,
            model=model,
            approvalPolicy=policy.approval_policy,
            sandbox=policy.sandbox,
            excludeTurns=True,
        )
        return self._request("thread/fork", params)

    def turn_start(
        self, text: str, *, model: str | None = None, mode: str | None = None
    ) -> Request:
        """``turn/start`` with ``text``; ``model`` / ``mode`` override this and later turns."""
        policy = mode_policy(mode, contained=self.contained) if mode is not None else None
        params = s.TurnStartParams(
            threadId=self._require_thread(),
            input=[s.TextUserInput(type="text", text=text)],
            model=model,
            approvalPolicy=policy.approval_policy if policy else None,
            sandboxPolicy=policy.sandbox_policy_for(self.writable_roots) if policy else None,
        )
        self.permission_mode = mode or self.permission_mode
        self.model = model or self.model
        return self._request("turn/start", params)

    def turn_steer(self, text: str) -> Request:
        """``turn/steer`` into the running turn; its success result yields a Steer event.

        Raises ``LookupError`` when no turn is running.
        """
        if self._turn is None:
            raise LookupError("no turn in progress")
        params = s.TurnSteerParams(
            threadId=self._require_thread(),
            expectedTurnId=self._turn.id,
            input=[s.TextUserInput(type="text", text=text)],
        )
        return self._request("turn/steer", params, text=text)

    def turn_interrupt(self) -> Request | None:
        """``turn/interrupt`` of the running turn, or ``None`` when there is none.

        The result (``{}``) comes before the turn is over; the turn ends with
        ``turn/completed`` status ``interrupted``.
        """
        if self._turn is None:
            return None
        params = s.TurnInterruptParams(threadId=self._require_thread(), turnId=self._turn.id)
        return self._request("turn/interrupt", params)

    def answer(
        self, approval: ApprovalRequest, answer: PermissionAnswer, *, source: str = "callback"
    ) -> tuple[str, PermissionDecision]:
        """The reply line for ``approval`` and the :class:`PermissionDecision` to publish.

        See :func:`decision_payload` for the wire decisions. Answering an
        approval twice raises ``KeyError``.
        """
        self._approvals.pop(approval.request_id)
        result = decision_payload(approval.kind, answer)
        decision = self._event(
            PermissionDecision,
            request_id=str(approval.request_id),
            decision=answer.decision,
            reason=answer.reason,
            source=source,
        )
        return dumps({"id": approval.request_id, "result": result}), decision

    def note_sent(self, line: str) -> None:
        """Replay: take note of a line Chorus wrote, as if this codec had made it
        (a request to pair with its answer, an approval answered)."""
        message = _json_object(line)
        rid, method = message.get("id"), message.get("method")
        params = message.get("params")
        params = params if isinstance(params, dict) else {}
        if isinstance(rid, int) and isinstance(method, str):
            self._pending[rid] = _Pending(method, _input_text(params))
            self._next_id = max(self._next_id, rid + 1)
            self.model = _str_or(params.get("model"), self.model)
        elif rid is not None and ("result" in message or "error" in message):
            self._approvals.pop(rid, None)

    def _require_thread(self) -> str:
        if self.thread_id is None:
            raise LookupError("no thread yet: thread/start has not completed")
        return self.thread_id

    # -- inbound -----------------------------------------------------------------

    def receive_line(self, line: str) -> list[Inbound]:
        """Decode one stdout line into inbound items (possibly none)."""
        self._line = line  # for Unknown events raised deep inside a handler
        try:
            message = json.loads(line)
        except ValueError:
            return [self._unknown(line, None)]
        if not isinstance(message, dict):
            return [self._unknown(line, None)]
        method = message.get("method")
        if "id" in message and isinstance(method, str):
            return self._on_server_request(message, line)
        if "id" in message:
            return self._on_response(message, line)
        if isinstance(method, str):
            return self._on_notification(method, message.get("params"), line)
        return [self._unknown(line, None)]

    def _event(self, cls: type[E], **fields: Any) -> E:
        """An event of ``cls`` stamped with the body name and the native thread and turn ids."""
        fields.setdefault("native_session_id", self.thread_id)
        fields.setdefault("turn_id", self.turn_id)
        return cls(body=BODY_NAME, **fields)

    def _unknown(self, raw: str, native_type: str | None) -> Unknown:
        return self._event(Unknown, raw=raw, native_type=native_type)

    # -- responses -----------------------------------------------------------------

    def _on_response(self, message: JsonDict, raw: str) -> list[Inbound]:
        rid = message.get("id")
        pending = self._pending.pop(rid, None) if isinstance(rid, int) else None
        if pending is None or not isinstance(rid, int):
            return [self._unknown(raw, "response")]
        error, result = message.get("error"), message.get("result")
        response = RpcResponse(
            id=rid,
            method=pending.method,
            result=result if isinstance(result, dict) else None,
            error=error if isinstance(error, dict) else None,
        )
        if not response.ok:
            return [response]
        try:
            events = self._on_result(pending, response.result or {})
        except ValidationError:
            events = [self._unknown(raw, pending.method)]
        return [*events, response]

    def _on_result(self, pending: _Pending, result: JsonDict) -> list[Inbound]:
        opened = _THREAD_RESULTS.get(pending.method)
        if opened is not None:
            return [self._thread_opened(opened.model_validate(result))]
        if pending.method == "turn/start":
            self._begin_turn(s.TurnStartResponse.model_validate(result).turn.id)
        elif pending.method == "turn/steer" and pending.text is not None:
            s.TurnSteerResponse.model_validate(result)
            return [self._event(Steer, text=pending.text, native=True)]
        elif pending.method == "initialize":
            s.InitializeResponse.model_validate(result)
        return []

    def _thread_opened(
        self, result: s.ThreadStartResponse | s.ThreadResumeResponse | s.ThreadForkResponse
    ) -> SessionStarted:
        self.thread_id = result.thread.id
        self.model = result.model
        self.initial_model = self.initial_model or result.model
        return self._event(
            SessionStarted,
            model=result.model,
            body_version=result.thread.cliVersion,
            cwd=result.cwd,
            permission_mode=self.permission_mode,
        )

    def _begin_turn(self, turn_id: str) -> None:
        if self._turn is None or self._turn.id != turn_id:
            self._turn = _TurnState(turn_id)

    # -- server requests -------------------------------------------------------------

    def _on_server_request(self, message: JsonDict, raw: str) -> list[Inbound]:
        method, rid = str(message["method"]), message["id"]
        if method not in APPROVAL_METHODS or not isinstance(rid, int | str):
            return self._refuse(rid, method, raw)
        try:
            kind, ask = permission_ask(method, message.get("params") or {}, self._changes_of)
        except ValidationError:
            return self._refuse(rid, method, raw)
        approval = ApprovalRequest(rid, method, kind, ask)
        self._approvals[rid] = approval
        request = self._event(
            PermissionRequest,
            request_id=str(rid),
            tool=ask.tool,
            native_tool=ask.native_tool,
            input=ask.input,
            call_id=ask.call_id,
            description=ask.description,
        )
        return [request, approval]

    def _changes_of(self, item_id: str) -> list[JsonDict]:
        return self._turn.changes.get(item_id, []) if self._turn else []

    def _refuse(self, rid: Any, method: str, raw: str) -> list[Inbound]:
        """Answer a server request Chorus cannot handle with a JSON-RPC error."""
        error = {"code": _METHOD_NOT_FOUND, "message": f"Chorus does not handle {method}"}
        return [self._unknown(raw, method), AutoReply(dumps({"id": rid, "error": error}))]

    # -- notifications -----------------------------------------------------------------

    def _on_notification(self, method: str, params: Any, raw: str) -> list[Inbound]:
        if method in IGNORED_NOTIFICATIONS:
            return []
        handler = _NOTIFICATIONS.get(method)
        if handler is None or not isinstance(params, dict) or not self._is_ours(params):
            return [self._unknown(raw, method)]
        try:
            return handler(self, params)
        except ValidationError:
            return [self._unknown(raw, method)]

    def _is_ours(self, params: JsonDict) -> bool:
        thread = params.get("threadId")
        return thread is None or self.thread_id is None or thread == self.thread_id

    def _on_turn_started(self, params: JsonDict) -> list[Inbound]:
        self._begin_turn(s.TurnStartedNotification.model_validate(params).turn.id)
        return []

    def _on_turn_completed(self, params: JsonDict) -> list[Inbound]:
        turn = s.TurnCompletedNotification.model_validate(params).turn
        state = self._turn or _TurnState(turn.id)
        self._turn = state  # keep the ids on the terminal event
        usage = None if is_zero(state.usage) else state.usage
        try:
            if turn.status == "completed":
                return [self._completed(state, usage, turn.durationMs)]
            if turn.status == "interrupted":
                return [self._interrupted(usage)]
            return [self._failed(_raw_error(params.get("turn")) or state.error, usage)]
        finally:
            self._turn = None

    def _completed(self, state: _TurnState, usage: Usage | None, ms: int | None) -> TurnCompleted:
        return self._event(
            TurnCompleted,
            result=state.last_text,
            stop_reason="completed",
            usage=usage,
            duration_ms=ms,
        )

    def _interrupted(self, usage: Usage | None) -> TurnFailed:
        error = ErrorInfo(code=ErrorCode.INTERRUPTED, message="turn interrupted")
        return self._event(TurnFailed, error=error, usage=usage, terminal_reason="interrupted")

    def _failed(self, error: JsonDict | None, usage: Usage | None) -> TurnFailed:
        info = (
            classify_turn_error(error)
            if error
            else make_error(ErrorCode.UNKNOWN, "turn failed without an error")
        )
        if self._rate_limits and info.code in _LIMIT_CODES:
            native = {**(info.native or {}), "rate_limits": self._rate_limits}
            info = info.model_copy(update={"native": native})
        return self._event(TurnFailed, error=info, usage=usage, terminal_reason="failed")

    def _on_error(self, params: JsonDict) -> list[Inbound]:
        note = s.ErrorNotification.model_validate(params)
        error = _raw_error(params) or {"message": note.error.message}
        if not note.willRetry:
            # Final: the same error comes again on turn/completed; keep it in case not.
            if self._turn is not None:
                self._turn.error = error
                return []
            return [self._event(Notice, message=note.error.message, kind="error")]
        attempt, limit, _ = parse_reconnecting(note.error.message) or (0, None, "")
        info = classify_turn_error(error)
        return [self._event(RetryNotice, attempt=attempt, max_retries=limit, error=info)]

    def _on_token_usage(self, params: JsonDict) -> list[Inbound]:
        usage = s.ThreadTokenUsageUpdatedNotification.model_validate(params).tokenUsage
        total = usage_from_camel(to_wire(usage.total))
        if self._turn is None:
            # Restored totals of a resumed thread: history, not this session's spend.
            self._usage.baseline(total)
            return []
        step = self._usage.observe(total, usage_from_camel(to_wire(usage.last)))
        if is_zero(step):
            return []
        self._turn.usage = add(self._turn.usage, step)
        return [self._event(UsageUpdate, usage=step, model=self.model)]

    def _on_rate_limits(self, params: JsonDict) -> list[Inbound]:
        """A snapshot with data becomes ``StatusChanged``; its state is the stable code
        (``rate_limited`` / ``quota_exhausted``) once a limit is reached."""
        snapshot = s.AccountRateLimitsUpdatedNotification.model_validate(params).rateLimits
        detail = to_wire(snapshot)
        # With a custom provider every field is null; only real data is worth an event.
        if not set(detail) - {"limitId", "limitName"}:
            return []
        self._rate_limits = detail
        reached = _LIMIT_REACHED.get(str(snapshot.rateLimitReachedType))
        state = str(reached) if reached else "rate_limits"
        return [self._event(StatusChanged, state=state, detail=detail)]

    def _on_status(self, params: JsonDict) -> list[Inbound]:
        status = s.ThreadStatusChangedNotification.model_validate(params).status
        detail = to_wire(status)
        detail.pop("type", None)
        return [self._event(StatusChanged, state=status.type, detail=detail or None)]

    def _on_plan(self, params: JsonDict) -> list[Inbound]:
        plan = s.TurnPlanUpdatedNotification.model_validate(params)
        entries = [PlanEntry(content=step.step, status=step.status) for step in plan.plan]
        return [self._event(Plan, entries=entries)]

    def _on_config_warning(self, params: JsonDict) -> list[Inbound]:
        note = s.ConfigWarningNotification.model_validate(params)
        return [self._event(Notice, message=note.summary, kind="warning")]

    def _on_warning(self, params: JsonDict) -> list[Inbound]:
        note = s.WarningNotification.model_validate(params)
        return [self._event(Notice, message=note.message, kind="warning")]

    def _on_deprecation(self, params: JsonDict) -> list[Inbound]:
        note = s.DeprecationNoticeNotification.model_validate(params)
        return [self._event(Notice, message=note.summary, kind="deprecation")]

    def _on_rerouted(self, params: JsonDict) -> list[Inbound]:
        note = s.ModelReroutedNotification.model_validate(params)
        self.model = note.toModel
        message = f"model rerouted from {note.fromModel} to {note.toModel} ({note.reason})"
        return [self._event(Notice, message=message, kind="model_rerouted")]

    # -- streaming deltas --------------------------------------------------------------

    def _on_text_delta(self, params: JsonDict) -> list[Inbound]:
        note = s.AgentMessageDeltaNotification.model_validate(params)
        return [self._event(TextDelta, text=note.delta, message_id=note.itemId)]

    def _on_summary_delta(self, params: JsonDict) -> list[Inbound]:
        note = s.ReasoningSummaryTextDeltaNotification.model_validate(params)
        return [self._event(Thinking, text=note.delta, delta=True, message_id=note.itemId)]

    def _on_reasoning_delta(self, params: JsonDict) -> list[Inbound]:
        note = s.ReasoningTextDeltaNotification.model_validate(params)
        return [self._event(Thinking, text=note.delta, delta=True, message_id=note.itemId)]

    def _on_command_output(self, params: JsonDict) -> list[Inbound]:
        note = s.CommandExecutionOutputDeltaNotification.model_validate(params)
        return [self._event(ToolOutputDelta, call_id=note.itemId, text=note.delta)]

    def _on_patch_output(self, params: JsonDict) -> list[Inbound]:
        note = s.FileChangeOutputDeltaNotification.model_validate(params)
        return [self._event(ToolOutputDelta, call_id=note.itemId, text=note.delta)]

    # -- items -------------------------------------------------------------------------

    def _on_item_started(self, params: JsonDict) -> list[Inbound]:
        item = s.ItemStartedNotification.model_validate(params).item
        if isinstance(item, s.FileChangeThreadItem) and self._turn is not None:
            # The approval request that may follow names only the item.
            self._turn.changes[item.id] = [change_dict(c) for c in item.changes]
        fields = tool_call_fields(item)
        return [self._event(ToolCall, **fields)] if fields else []

    def _on_item_completed(self, params: JsonDict) -> list[Inbound]:
        item = s.ItemCompletedNotification.model_validate(params).item
        if isinstance(item, s.AgentMessageThreadItem):
            if self._turn is not None:
                self._turn.last_text = item.text
            return [self._event(Text, text=item.text, message_id=item.id)]
        if isinstance(item, s.ReasoningThreadItem):
            text = "\n".join([*(item.summary or []), *(item.content or [])])
            return [self._event(Thinking, text=text, message_id=item.id)] if text else []
        if isinstance(item, s.ContextCompactionThreadItem):
            return [self._event(Notice, message="context compacted", kind="compaction")]
        if isinstance(item, s.PlanThreadItem):
            return [self._event(Plan, entries=[PlanEntry(content=item.text)])]
        fields = tool_result_fields(item)
        if fields is not None:
            return [*self._file_changes(item), self._event(ToolResult, **fields)]
        if item.type in _SILENT_ITEMS:
            return []
        return [self._unknown(self._line, f"item:{item.type}")]

    def _file_changes(self, item: Any) -> list[Inbound]:
        """One FileChange per path of a fileChange item that was applied."""
        if not isinstance(item, s.FileChangeThreadItem) or item.status != "completed":
            return []
        changes = [change_dict(c) for c in item.changes]
        return [
            self._event(FileChange, call_id=item.id, path=c["path"], kind=c["kind"], diff=c["diff"])
            for c in changes
        ]


def _raw_error(container: Any) -> JsonDict | None:
    """The ``error`` object of a (validated) message as received, for ``ErrorInfo.native``."""
    error = container.get("error") if isinstance(container, dict) else None
    return error if isinstance(error, dict) else None


_NOTIFICATIONS: dict[str, Callable[[AppServerCodec, JsonDict], list[Inbound]]] = {
    "turn/started": AppServerCodec._on_turn_started,
    "turn/completed": AppServerCodec._on_turn_completed,
    "error": AppServerCodec._on_error,
    "item/started": AppServerCodec._on_item_started,
    "item/completed": AppServerCodec._on_item_completed,
    "item/agentMessage/delta": AppServerCodec._on_text_delta,
    "item/reasoning/summaryTextDelta": AppServerCodec._on_summary_delta,
    "item/reasoning/textDelta": AppServerCodec._on_reasoning_delta,
    "item/commandExecution/outputDelta": AppServerCodec._on_command_output,
    "item/fileChange/outputDelta": AppServerCodec._on_patch_output,
    "thread/tokenUsage/updated": AppServerCodec._on_token_usage,
    "account/rateLimits/updated": AppServerCodec._on_rate_limits,
    "thread/status/changed": AppServerCodec._on_status,
    "turn/plan/updated": AppServerCodec._on_plan,
    "configWarning": AppServerCodec._on_config_warning,
    "warning": AppServerCodec._on_warning,
    "deprecationNotice": AppServerCodec._on_deprecation,
    "model/rerouted": AppServerCodec._on_rerouted,
}

_THREAD_RESULTS: dict[
    str, type[s.ThreadStartResponse] | type[s.ThreadResumeResponse] | type[s.ThreadForkResponse]
] = {
    "thread/start": s.ThreadStartResponse,
    "thread/resume": s.ThreadResumeResponse,
    "thread/fork": s.ThreadForkResponse,
}
