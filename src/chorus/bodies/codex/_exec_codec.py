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
* some tool calls print no item at all (a command Codex thinks its sandbox
  blocked, a rejected patch): the body also feeds the lines of Codex's rollout
  that :func:`rollout_wanted` keeps (see ``_rollout``). A rollout tool call that
  no item reported becomes events when its output is recorded (Codex records an
  item's end before the output), or else just before the run's terminal event.
"""

from __future__ import annotations

import json
import re
import shlex
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
#: Rollout ``response_item`` payloads that are tool calls or their outputs.
_ROLLOUT_CALLS = frozenset({"function_call", "custom_tool_call", "web_search_call"})
_ROLLOUT_OUTPUTS = frozenset({"function_call_output", "custom_tool_call_output"})
#: Rollout ``event_msg`` items that exec also prints as a stdout item.
_ROLLOUT_REPORTED = frozenset({"CommandExecution", "FileChange", "McpToolCall", "WebSearch"})
_EXIT_CODE = re.compile(r"^(?:Process exited with code|Exit code:) (-?\d+)$", re.MULTILINE)
_PATCH_FILE = re.compile(r"^\*\*\* (Add|Update|Delete) File: (.+)$", re.MULTILINE)


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
        self._rollout_calls: dict[str, dict[str, Any]] = {}
        self._rollout_outputs: dict[str, dict[str, Any]] = {}
        self._reported: set[str] = set()

    def begin_run(self, *, model: str | None, permission_mode: str | None) -> None:
        """Reset the per-run state; call before spawning each process."""
        self.model = model
        self.permission_mode = permission_mode
        self._terminal = False
        self._last_text = None
        self._last_error = None
        self._rollout_calls, self._rollout_outputs, self._reported = {}, {}, set()

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
        unreported = self._unreported()
        if interrupted:
            error = ErrorInfo(code=ErrorCode.INTERRUPTED, message="turn interrupted")
            failed = self._event(TurnFailed, error=error, terminal_reason="interrupted")
        else:
            failed = self._event(TurnFailed, error=self._exit_error(exit_code, stderr_tail))
        return [*unreported, failed]

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
        return [*self._unreported(), *events, done]

    def _on_turn_failed(self, message: JsonDict, raw: str) -> list[Event]:
        self._terminal = True
        error = message.get("error") or {}
        text = str(error.get("message") or self._last_error or "turn failed")
        failed = self._event(TurnFailed, error=classify_text(text), terminal_reason="failed")
        return [*self._unreported(), failed]

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

    # -- the rollout ---------------------------------------------------------------------

    def _on_response_item(self, message: JsonDict, raw: str) -> list[Event]:
        payload = message["payload"]
        kind = payload.get("type")
        if kind in _ROLLOUT_CALLS:
            call = _rollout_call(payload)
            self._rollout_calls.setdefault(call["call_id"], call)
        elif kind in _ROLLOUT_OUTPUTS:
            call_id = str(payload["call_id"])
            self._rollout_outputs.setdefault(call_id, payload)
            # Codex records an item's end before its output: none by now, none at all.
            return self._unreported(call_id)
        return []

    def _on_event_msg(self, message: JsonDict, raw: str) -> list[Event]:
        item = message["payload"].get("item") or {}
        if item.get("type") in _ROLLOUT_REPORTED:
            self._reported.add(str(item.get("id")))
        return []

    def _unreported(self, only: str | None = None) -> list[Event]:
        """The rollout's tool calls (and outputs) that no stdout item reported: ``only``
        that one, or all that are left."""
        events: list[Event] = []
        for call_id in [only] if only else list(self._rollout_calls):
            call = self._rollout_calls.pop(call_id, None)
            if call is None or call_id in self._reported:
                continue
            events.append(self._event(ToolCall, **call))
            output = self._rollout_outputs.pop(call_id, None)
            if output is not None:
                events.append(self._event(ToolResult, **_rollout_result(call, output)))
            elif call["native_tool"] == "web_search_call":
                events.append(self._event(ToolResult, call_id=call_id, status="completed"))
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


def rollout_wanted(line: str) -> bool:
    """Whether a rollout line matters to the codec: a tool call, its output, or the
    record of an item exec also printed (the rest is prompts and bookkeeping)."""
    try:
        message = json.loads(line)
        payload = message["payload"]
        if message["type"] == "response_item":
            return payload["type"] in _ROLLOUT_CALLS | _ROLLOUT_OUTPUTS
        if message["type"] == "event_msg" and payload["type"] in ("item_started", "item_completed"):
            return payload["item"]["type"] in _ROLLOUT_REPORTED
    except (ValueError, KeyError, TypeError):
        return False
    return False


def _rollout_call(payload: JsonDict) -> dict[str, Any]:
    """ToolCall fields for a rollout ``function_call`` / ``custom_tool_call`` /
    ``web_search_call``."""
    call_id = str(payload.get("call_id") or payload.get("id"))
    kind = payload["type"]
    if kind == "web_search_call":
        action = payload.get("action") or {}
        query = str(action.get("query") or "") if isinstance(action, dict) else ""
        return _call_fields(call_id, "web_search_call", {"query": query}, query)
    name = str(payload.get("name"))
    if kind == "custom_tool_call":
        text = str(payload.get("input") or "")
        if name == "apply_patch":
            changes = _patch_changes(text)
            paths = ", ".join(c["path"] for c in changes)
            return _call_fields(call_id, name, {"changes": changes, "patch": text}, f"edit {paths}")
        return _call_fields(call_id, name, {"input": text}, name)
    args = _arguments(payload.get("arguments"))
    if name in ("exec_command", "shell", "local_shell"):
        command = _command_text(args.get("cmd") or args.get("command"))
        workdir = args.get("workdir")
        extra = {"workdir": workdir} if isinstance(workdir, str) else {}
        return _call_fields(call_id, name, {"command": command, **extra}, command)
    return _call_fields(call_id, name, args, name)


def _arguments(raw: Any) -> JsonDict:
    try:
        value = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        return {"arguments": raw}
    return value if isinstance(value, dict) else {"arguments": value}


def _command_text(command: Any) -> str:
    if isinstance(command, list):
        return shlex.join(str(part) for part in command)
    return str(command or "")


def _patch_changes(patch: str) -> list[JsonDict]:
    """The files an ``apply_patch`` input names, with how each changes."""
    return [
        {"path": path.strip(), "kind": action.lower()}
        for action, path in _PATCH_FILE.findall(patch)
    ]


def _rollout_result(call: dict[str, Any], output: JsonDict) -> dict[str, Any]:
    """ToolResult fields for a call's rollout output (the text the model got)."""
    text = _flatten_output(output.get("output"))
    match = _EXIT_CODE.search(text)
    code = int(match.group(1)) if match else None
    failed = code != 0 if code is not None else call["tool"] in ("shell", "edit")
    status = "failed" if failed else "completed"
    return {"call_id": call["call_id"], "output": text, "is_error": failed, "status": status,
            "exit_code": code}  # fmt: skip


def _flatten_output(output: Any) -> str:
    if isinstance(output, str):
        return output
    if isinstance(output, list):
        return "".join(str(p.get("text", "")) for p in output if isinstance(p, dict))
    if isinstance(output, dict):
        return str(output.get("content") or json.dumps(output))
    return ""


_HANDLERS = {
    "thread.started": ExecCodec._on_thread_started,
    "turn.started": ExecCodec._on_turn_started,
    "turn.completed": ExecCodec._on_turn_completed,
    "turn.failed": ExecCodec._on_turn_failed,
    "error": ExecCodec._on_error,
    "item.started": ExecCodec._on_item_started,
    "item.updated": ExecCodec._on_item_updated,
    "item.completed": ExecCodec._on_item_completed,
    "response_item": ExecCodec._on_response_item,
    "event_msg": ExecCodec._on_event_msg,
}
