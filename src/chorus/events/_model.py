"""Canonical events: the one vocabulary every body is normalized into.

Each event is a frozen pydantic model with a literal ``type``; :data:`Event` is
their discriminated union. A codec produces events with ``seq=0`` and an empty
``session_id``; the session stamps both (``stamp``) before the log appends them.
Unrecognised native input becomes :class:`Unknown` carrying the raw line, so a
newer CLI neither crashes Chorus nor loses data.
"""

from __future__ import annotations

import time
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

JsonDict = dict[str, Any]


class ErrorCode(StrEnum):
    """Stable error codes shared by every body (DESIGN.md, "Canonical events")."""

    RATE_LIMITED = "rate_limited"
    QUOTA_EXHAUSTED = "quota_exhausted"
    AUTH = "auth"
    CONTEXT_OVERFLOW = "context_overflow"
    API_ERROR = "api_error"
    SERVER_ERROR = "server_error"
    OVERLOADED = "overloaded"
    NETWORK = "network"
    BODY_CRASHED = "body_crashed"
    BODY_PROTOCOL = "body_protocol"
    TIMEOUT = "timeout"
    INTERRUPTED = "interrupted"
    UNSUPPORTED = "unsupported"
    POLICY_DENIED = "policy_denied"
    SESSION_NOT_FOUND = "session_not_found"
    INVALID_REQUEST = "invalid_request"
    #: Chorus could not write the log (the disk is full); the job ended once it could.
    STORAGE_FULL = "storage_full"
    #: A ``[budget]`` limit was reached: the job was stopped before spending more.
    BUDGET_EXCEEDED = "budget_exceeded"
    UNKNOWN = "unknown"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


class ErrorInfo(_Frozen):
    """What went wrong, in a form a router can act on without reading text."""

    code: ErrorCode
    message: str
    retryable: bool = False
    retry_after_s: float | None = None
    http_status: int | None = None
    native: JsonDict | None = None


class Usage(_Frozen):
    """Token counts for one turn (never cumulative: codecs turn totals into deltas)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    cache_write_input_tokens: int = 0
    reasoning_tokens: int = 0


class _EventBase(_Frozen):
    session_id: str = ""
    seq: int = Field(default=0, ge=0)
    ts: float = Field(default_factory=time.time)
    body: str = ""
    native_session_id: str | None = None
    turn_id: str | None = None
    job_id: str | None = None

    def stamp(self, *, session_id: str, seq: int, body: str | None = None) -> Any:
        """Return a copy with the session's id and sequence number filled in."""
        update: dict[str, Any] = {"session_id": session_id, "seq": seq}
        if body is not None:
            update["body"] = body
        return self.model_copy(update=update)


class SessionStarted(_EventBase):
    type: Literal["session_started"] = "session_started"
    model: str | None = None
    body_version: str | None = None
    cwd: str | None = None
    tools: list[str] = Field(default_factory=list)
    permission_mode: str | None = None


class TextDelta(_EventBase):
    type: Literal["text_delta"] = "text_delta"
    text: str
    message_id: str | None = None


class Text(_EventBase):
    """A complete assistant text block."""

    type: Literal["text"] = "text"
    text: str
    message_id: str | None = None


class Thinking(_EventBase):
    type: Literal["thinking"] = "thinking"
    text: str
    delta: bool = False
    message_id: str | None = None


class ToolCall(_EventBase):
    type: Literal["tool_call"] = "tool_call"
    call_id: str
    tool: str
    native_tool: str
    input: JsonDict = Field(default_factory=dict)
    title: str | None = None


class ToolOutputDelta(_EventBase):
    type: Literal["tool_output_delta"] = "tool_output_delta"
    call_id: str
    text: str


class ToolResult(_EventBase):
    type: Literal["tool_result"] = "tool_result"
    call_id: str
    output: str = ""
    is_error: bool = False
    exit_code: int | None = None
    status: str | None = None
    untrusted: bool = False


class FileChange(_EventBase):
    type: Literal["file_change"] = "file_change"
    call_id: str | None = None
    path: str
    kind: str
    diff: str | None = None


class PermissionRequest(_EventBase):
    type: Literal["permission_request"] = "permission_request"
    request_id: str
    tool: str
    native_tool: str
    input: JsonDict = Field(default_factory=dict)
    call_id: str | None = None
    description: str | None = None


class PermissionDecision(_EventBase):
    type: Literal["permission_decision"] = "permission_decision"
    request_id: str
    decision: Literal["allow", "deny"]
    reason: str | None = None
    source: str = "callback"


class PlanEntry(_Frozen):
    content: str
    status: str = "pending"
    priority: str | None = None


class Plan(_EventBase):
    type: Literal["plan"] = "plan"
    entries: list[PlanEntry]


class UsageUpdate(_EventBase):
    type: Literal["usage"] = "usage"
    usage: Usage
    cost_usd: float | None = None
    model: str | None = None


class Metered(_EventBase):
    """One model-API request that went through Chorus's meter (``chorus.meter``): the
    usage the API itself reported (input includes cached and cache-written tokens,
    output includes reasoning), priced from the meter's table (None: an unknown
    model), the HTTP status the provider answered, and whether the usage was read to
    its end (``complete``: false when the stream was cut or had none)."""

    type: Literal["metered"] = "metered"
    api: str
    model: str | None = None
    usage: Usage = Field(default_factory=Usage)
    cost_usd: float | None = None
    status: int = 0
    upstream: str = ""
    path: str = ""
    duration_ms: int = 0
    complete: bool = False
    request_id: str = ""


class RetryNotice(_EventBase):
    """The CLI is retrying an API call by itself (e.g. Claude ``api_retry``)."""

    type: Literal["retry_notice"] = "retry_notice"
    attempt: int
    max_retries: int | None = None
    delay_ms: int | None = None
    error: ErrorInfo


class StatusChanged(_EventBase):
    type: Literal["status"] = "status"
    state: str
    detail: JsonDict | None = None


class TurnCompleted(_EventBase):
    type: Literal["turn_completed"] = "turn_completed"
    result: str | None = None
    stop_reason: str | None = None
    usage: Usage | None = None
    cost_usd: float | None = None
    duration_ms: int | None = None
    num_turns: int | None = None
    permission_denials: list[JsonDict] = Field(default_factory=list)
    terminal_reason: str | None = None


class TurnFailed(_EventBase):
    type: Literal["turn_failed"] = "turn_failed"
    error: ErrorInfo
    usage: Usage | None = None
    cost_usd: float | None = None
    terminal_reason: str | None = None


class Steer(_EventBase):
    type: Literal["steer"] = "steer"
    text: str
    native: bool = True


class Queued(_EventBase):
    type: Literal["queued"] = "queued"
    text: str
    position: int = 0


class Flag(_EventBase):
    """A decision flagged for a person: ``name`` is what happened to it
    (``raised``, ``approved``, ``rejected``, ``timed_out``, ``approval`` for a
    permission ask that waits), ``text`` the question."""

    type: Literal["flag"] = "flag"
    name: str
    text: str = ""
    flag_id: str | None = None
    options: list[str] = Field(default_factory=list)
    default: str | None = None
    choice: str | None = None
    deadline_at: float | None = None
    answer_hint: str | None = None


class Notice(_EventBase):
    """Something a person should see that is not an error (e.g. a resume fallback)."""

    type: Literal["notice"] = "notice"
    message: str
    kind: str = "info"


class CompatibilityWarning(_EventBase):
    type: Literal["compatibility_warning"] = "compatibility_warning"
    control: str
    message: str


class ControlRequestEvent(_EventBase):
    type: Literal["control_request"] = "control_request"
    request_id: str
    subtype: str
    payload: JsonDict = Field(default_factory=dict)


class ControlResponseEvent(_EventBase):
    type: Literal["control_response"] = "control_response"
    request_id: str
    ok: bool
    payload: JsonDict = Field(default_factory=dict)
    error: ErrorInfo | None = None


class Handoff(_EventBase):
    type: Literal["handoff"] = "handoff"
    from_body: str
    to_body: str
    reason: ErrorInfo
    bundle_chars: int = 0


class Routed(_EventBase):
    """Why a job runs on its body: the task's class, the strategy, and
    the reason in words; ``skipped`` are the bodies passed over and why."""

    type: Literal["routed"] = "routed"
    to_body: str
    reason: str
    strategy: str | None = None
    kind: str | None = None
    load: str | None = None
    skipped: list[str] = Field(default_factory=list)
    failover: bool = True


class Worktree(_EventBase):
    """Chorus did something to a job's git worktree: ``action`` is one of
    created, locked, committed, unlocked, merged, removed, refused, orphan."""

    type: Literal["worktree"] = "worktree"
    action: str
    path: str
    branch: str = ""
    detail: str = ""


class SessionEnded(_EventBase):
    type: Literal["session_ended"] = "session_ended"
    reason: str
    exit_code: int | None = None
    error: ErrorInfo | None = None


class JobEnded(_EventBase):
    """The daemon finished a job (the last event of that job in the log)."""

    type: Literal["job_ended"] = "job_ended"
    state: str
    result: str | None = None
    error: ErrorInfo | None = None
    attempts: int = 1
    #: The bodies the job left on failover, in order (``body`` is the one it ended on).
    failed_over_from: list[str] = Field(default_factory=list)


class MemoryChanged(_EventBase):
    """Chorus wrote its memory (``chorus.memory``): an item was added, reinforced by a
    duplicate, edited, superseded by a newer one, or forgotten."""

    type: Literal["memory"] = "memory"
    op: Literal["add", "reinforce", "edit", "supersede", "forget"]
    item_id: str
    kind: str
    text: str = ""
    source_kind: str = "user"


class Unknown(_EventBase):
    """A native message no codec rule matched; ``raw`` is the line as received."""

    type: Literal["unknown"] = "unknown"
    raw: str
    native_type: str | None = None


Event = Annotated[
    SessionStarted
    | TextDelta
    | Text
    | Thinking
    | ToolCall
    | ToolOutputDelta
    | ToolResult
    | FileChange
    | PermissionRequest
    | PermissionDecision
    | Plan
    | UsageUpdate
    | Metered
    | RetryNotice
    | StatusChanged
    | TurnCompleted
    | TurnFailed
    | Steer
    | Queued
    | Flag
    | Notice
    | CompatibilityWarning
    | ControlRequestEvent
    | ControlResponseEvent
    | Handoff
    | Routed
    | Worktree
    | SessionEnded
    | JobEnded
    | MemoryChanged
    | Unknown,
    Field(discriminator="type"),
]

# Keys only in pydantic-core's string cache (process-wide, 16,384 strings): with values
# too, each event read back kept its ids there, the daemon's memory growing with
# every job until the cache was full.
EVENT_ADAPTER: TypeAdapter[Event] = TypeAdapter(
    Event, config=ConfigDict(defer_build=True, cache_strings="keys")
)

EVENT_TYPES: tuple[type[_EventBase], ...] = (
    SessionStarted,
    TextDelta,
    Text,
    Thinking,
    ToolCall,
    ToolOutputDelta,
    ToolResult,
    FileChange,
    PermissionRequest,
    PermissionDecision,
    Plan,
    UsageUpdate,
    Metered,
    RetryNotice,
    StatusChanged,
    TurnCompleted,
    TurnFailed,
    Steer,
    Queued,
    Flag,
    Notice,
    CompatibilityWarning,
    ControlRequestEvent,
    ControlResponseEvent,
    Handoff,
    Routed,
    Worktree,
    SessionEnded,
    JobEnded,
    MemoryChanged,
    Unknown,
)
