"""Sans-I/O codec for ``codex exec --json``: one JSON event per stdout line.

One :class:`ExecCodec` lives as long as the body and sees every run of it
(``codex exec`` and each ``codex exec resume``): call :meth:`ExecCodec.begin_run`
before a run, :meth:`ExecCodec.receive_line` for each stdout line, and
:meth:`ExecCodec.finish` once the process has exited, which supplies the
terminal event the run did not print (a crash, a kill, an interrupt, a
``codex`` that failed before it could say anything).

Facts (codex-cli 0.169.0, AGENT_CLIS.md 2.4 and 2.5):

* events: ``thread.started``, ``turn.started``, ``item.started`` /
  ``item.updated`` / ``item.completed``, ``turn.completed`` (usage),
  ``turn.failed``, ``error``. No text deltas, no live command output.
* ``turn.completed.usage`` is cumulative for the thread, across resumes; the
  codec hands out per-turn deltas when it knows the previous total.
* ``error`` lines starting ``Reconnecting...`` are retries, not failures.
* errors are text only; :func:`classify_text` maps them to codes.
"""

from __future__ import annotations

import json
from typing import Any

from chorus.bodies._body import crash_error
from chorus.bodies._tools import normalize_tool
from chorus.bodies.codex._errors import classify_text, make_error, parse_reconnecting
from chorus.bodies.codex._usage import UsageMeter, is_zero, usage_from_snake
from chorus.events import (
    ErrorCode,
    ErrorInfo,
    Event,
    FileChange,
    JsonDict,
    Notice,
    Plan,
    PlanEntry,
    RetryNotice,
    SessionStarted,
    Text,
    Thinking,
    ToolCall,
    ToolResult,
    TurnCompleted,
    TurnFailed,
    Unknown,
    UsageUpdate,
)

EXEC_BODY_NAME = "codex-exec"

_TODO_STATUS = {True: "completed", False: "pending"}


class ExecCodec:
    """State across the runs of one exec body: thread id, usage totals, run outcome.

    ``resumed`` says the first thread was made before this codec existed, so its
    first cumulative usage cannot be split into turns (it is then not reported).
    """

    def __init__(self, *, model: str | None = None, resumed: bool = False) -> None:
        self.thread_id: str | None = None
        self.model = model
        self.permission_mode: str | None = None
        self._meter = UsageMeter()
        self._history_unknown = resumed
        self._announced = False
        self._terminal = False
        self._last_text: str | None = None
        self._last_error: str | None = None

    def begin_run(self, *, model: str | None, permission_mode: str | None) -> None:
        """Reset the per-run state; call before spawning each process."""
        self.model = model
        self.permission_mode = permission_mode
        self._terminal = False
        self._last_text = None
        self._last_error = None

    @property
    def terminal_seen(self) -> bool:
        """True once this run printed ``turn.completed`` or ``turn.failed``."""
        return self._terminal

    # -- inbound -----------------------------------------------------------------

    def receive_line(self, line: str) -> list[Event]:
        """Decode one stdout line into canonical events (possibly none)."""
        try:
            message = json.loads(line)
        except ValueError:
            return [self._unknown(line, None)]
        if not isinstance(message, dict) or not isinstance(message.get("type"), str):
            return [self._unknown(line, None)]
        kind = message["type"]
        handler = _HANDLERS.get(kind)
        if handler is None:
            return [self._unknown(line, kind)]
        try:
            return handler(self, message, line)
        except (KeyError, TypeError, ValueError):
            return [self._unknown(line, kind)]

    def finish(self, exit_code: int | None, stderr_tail: str, *, interrupted: bool) -> list[Event]:
        """The terminal event for a run whose process has exited, if it printed none."""
        if self._terminal:
            return []
        self._terminal = True
        if interrupted:
            error = ErrorInfo(code=ErrorCode.INTERRUPTED, message="turn interrupted")
            return [self._event(TurnFailed, error=error, terminal_reason="interrupted")]
        return [self._event(TurnFailed, error=self._exit_error(exit_code, stderr_tail))]

    def _exit_error(self, exit_code: int | None, stderr_tail: str) -> ErrorInfo:
        """Why a run ended without ``turn.failed``: signal, stderr text, or silence."""
        if exit_code is None or exit_code < 0:
            return crash_error(exit_code, stderr_tail)
        message = self._last_error or _stderr_error(stderr_tail)
        if message:
            info = classify_text(message)
            if info.code != ErrorCode.UNKNOWN:
                return info
        if exit_code == 0:
            text = "codex exec exited without turn.completed"
            return make_error(ErrorCode.BODY_PROTOCOL, text, native={"exit_code": 0})
        return crash_error(exit_code, stderr_tail)

    def _event(self, cls: type[Any], **fields: Any) -> Any:
        fields.setdefault("native_session_id", self.thread_id)
        return cls(body=EXEC_BODY_NAME, **fields)

    def _unknown(self, raw: str, native_type: str | None) -> Unknown:
        event: Unknown = self._event(Unknown, raw=raw, native_type=native_type)
        return event

    # -- events ------------------------------------------------------------------------

    def _on_thread_started(self, message: JsonDict, raw: str) -> list[Event]:
        thread_id = str(message["thread_id"])
        if self._announced and thread_id == self.thread_id:
            return []
        self.thread_id = thread_id
        self._announced = True
        started = self._event(
            SessionStarted, model=self.model, permission_mode=self.permission_mode
        )
        return [started]

    def _on_turn_started(self, message: JsonDict, raw: str) -> list[Event]:
        return []

    def _on_turn_completed(self, message: JsonDict, raw: str) -> list[Event]:
        self._terminal = True
        total = usage_from_snake(message.get("usage") or {})
        if self._history_unknown and not self._meter.known:
            self._meter.baseline(total)
            usage = None
        else:
            step = self._meter.observe(total)
            usage = None if is_zero(step) else step
        events: list[Event] = []
        if usage is not None:
            events.append(self._event(UsageUpdate, usage=usage, model=self.model))
        done = self._event(
            TurnCompleted, result=self._last_text, stop_reason="completed", usage=usage
        )
        return [*events, done]

    def _on_turn_failed(self, message: JsonDict, raw: str) -> list[Event]:
        self._terminal = True
        error = message.get("error") or {}
        text = str(error.get("message") or self._last_error or "turn failed")
        return [self._event(TurnFailed, error=classify_text(text), terminal_reason="failed")]

    def _on_error(self, message: JsonDict, raw: str) -> list[Event]:
        text = str(message.get("message") or "")
        retry = parse_reconnecting(text)
        if retry is None:
            # Final errors are repeated by turn.failed; remember in case it never comes.
            self._last_error = text
            return []
        attempt, limit, cause = retry
        notice = self._event(
            RetryNotice, attempt=attempt, max_retries=limit, error=classify_text(cause)
        )
        return [notice]

    def _on_item_started(self, message: JsonDict, raw: str) -> list[Event]:
        item = message["item"]
        if item.get("type") == "todo_list":
            return [self._plan(item)]
        call = _tool_call(item)
        return [self._event(ToolCall, **call)] if call else []

    def _on_item_updated(self, message: JsonDict, raw: str) -> list[Event]:
        item = message["item"]
        return [self._plan(item)] if item.get("type") == "todo_list" else []

    def _on_item_completed(self, message: JsonDict, raw: str) -> list[Event]:
        item = message["item"]
        kind = item.get("type")
        if kind == "agent_message":
            self._last_text = str(item.get("text") or "")
            return [self._event(Text, text=self._last_text, message_id=item.get("id"))]
        if kind == "reasoning":
            return [
                self._event(Thinking, text=str(item.get("text") or ""), message_id=item.get("id"))
            ]
        if kind == "error":
            return [self._event(Notice, message=str(item.get("message")), kind="warning")]
        if kind == "todo_list":
            return [self._plan(item)]
        if kind == "file_change":
            return self._file_change_done(item)
        result = _tool_result(item)
        if result is not None:
            return [self._event(ToolResult, **result)]
        return [self._unknown(raw, f"item:{kind}")]

    def _file_change_done(self, item: JsonDict) -> list[Event]:
        call_id = str(item.get("id"))
        changes = [c for c in item.get("changes") or [] if isinstance(c, dict)]
        status = str(item.get("status") or "completed")
        events: list[Event] = []
        if status == "completed":
            events = [
                self._event(
                    FileChange, call_id=call_id, path=str(c.get("path")), kind=str(c.get("kind"))
                )
                for c in changes
            ]
        failed = status != "completed"
        events.append(self._event(ToolResult, call_id=call_id, is_error=failed, status=status))
        return events

    def _plan(self, item: JsonDict) -> Plan:
        entries = [
            PlanEntry(content=str(i.get("text")), status=_TODO_STATUS[bool(i.get("completed"))])
            for i in item.get("items") or []
            if isinstance(i, dict)
        ]
        plan: Plan = self._event(Plan, entries=entries)
        return plan


def _stderr_error(stderr_tail: str) -> str | None:
    """The ``Error: ...`` line codex prints on stderr before a backtrace, if any."""
    for line in stderr_tail.splitlines():
        if line.startswith("Error:"):
            return line.removeprefix("Error:").strip()
    return None


def _tool_call(item: JsonDict) -> dict[str, Any] | None:
    """ToolCall fields for a tool-like exec item, else ``None``."""
    kind = item.get("type")
    call_id = str(item.get("id"))
    if kind == "command_execution":
        command = str(item.get("command") or "")
        return _call_fields(call_id, "command_execution", {"command": command}, command)
    if kind == "file_change":
        changes = [c for c in item.get("changes") or [] if isinstance(c, dict)]
        paths = ", ".join(str(c.get("path")) for c in changes)
        return _call_fields(call_id, "file_change", {"changes": changes}, f"edit {paths}")
    if kind == "mcp_tool_call":
        native = f"mcp__{item.get('server')}__{item.get('tool')}"
        args = item.get("arguments")
        return _call_fields(call_id, native, args if isinstance(args, dict) else {}, native)
    if kind == "web_search":
        query = str(item.get("query") or "")
        return _call_fields(call_id, "web_search", {"query": query}, query)
    return None


def _call_fields(call_id: str, native: str, input_: JsonDict, title: str) -> dict[str, Any]:
    tool = "mcp" if native.startswith("mcp__") else normalize_tool(native)
    return {
        "call_id": call_id,
        "tool": tool,
        "native_tool": native,
        "input": input_,
        "title": title,
    }


def _tool_result(item: JsonDict) -> dict[str, Any] | None:
    """ToolResult fields for a completed tool-like exec item, else ``None``."""
    kind = item.get("type")
    call_id = str(item.get("id"))
    status = item.get("status")
    if kind == "command_execution":
        code = item.get("exit_code")
        failed = status in ("failed", "declined") or code not in (0, None)
        output = str(item.get("aggregated_output") or "")
        return {"call_id": call_id, "output": output, "is_error": failed, "status": status,
                "exit_code": code}  # fmt: skip
    if kind == "mcp_tool_call":
        error = item.get("error")
        output = json.dumps(item.get("result")) if item.get("result") is not None else ""
        if isinstance(error, dict):
            output = str(error.get("message"))
        return {"call_id": call_id, "output": output, "is_error": status == "failed",
                "status": status}  # fmt: skip
    if kind == "web_search":
        return {"call_id": call_id, "status": "completed"}
    return None


_HANDLERS = {
    "thread.started": ExecCodec._on_thread_started,
    "turn.started": ExecCodec._on_turn_started,
    "turn.completed": ExecCodec._on_turn_completed,
    "turn.failed": ExecCodec._on_turn_failed,
    "error": ExecCodec._on_error,
    "item.started": ExecCodec._on_item_started,
    "item.updated": ExecCodec._on_item_updated,
    "item.completed": ExecCodec._on_item_completed,
}
