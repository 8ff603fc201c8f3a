"""Sans-I/O codec for ``gemini -p ... --output-format stream-json`` (one run per turn).

:meth:`GeminiStreamCodec.feed` takes one stdout line and returns canonical
events; :meth:`~GeminiStreamCodec.finish` is told how the process ended and
returns the turn's terminal event when the stream did not carry one. A line
never raises.

Mapping (``type`` → events):

- ``init`` → :class:`SessionStarted` for a session id not seen before (a
  ``--resume`` run repeats it: nothing); ``message`` (user) → nothing (our own
  prompt echoed); ``message`` (assistant) → :class:`TextDelta` or :class:`Text`.
- ``tool_use`` → :class:`ToolCall` (+ :class:`Plan` for ``write_todos``);
  ``tool_result`` → :class:`FileChange` for a successful ``write_file`` /
  ``replace``, then :class:`ToolResult` (errors keep the run going).
- ``error`` → kept as the failure text (severity ``error``) or a
  :class:`Notice` (any other severity).
- ``result`` → :class:`TurnCompleted` with usage from ``stats``, or
  :class:`TurnFailed` when ``status`` is ``error`` (even with exit code 0).
- No ``result``: :meth:`finish` classifies the exit code (173 = 429, ...);
  otherwise ``body_crashed``, or ``interrupted`` when Chorus stopped it.
"""

from __future__ import annotations

import json
from typing import Any

from chorus.bodies._tools import normalize_tool
from chorus.bodies.gemini._errors import exit_error, result_error
from chorus.events import (
    ErrorInfo,
    Event,
    FileChange,
    JsonDict,
    Notice,
    Plan,
    PlanEntry,
    SessionStarted,
    Text,
    TextDelta,
    ToolCall,
    ToolResult,
    TurnCompleted,
    TurnFailed,
    Unknown,
    Usage,
)

_WRITERS = {"write_file": "write", "replace": "modify"}


class GeminiStreamCodec:
    """Events for the ``stream-json`` runs of one Gemini session, turn after turn.

    Call :meth:`start_turn` before feeding each run's lines.
    """

    def __init__(self, *, body: str = "gemini", cwd: str | None = None) -> None:
        self.body = body
        self.cwd = cwd
        self.session_id: str | None = None
        self.model: str | None = None
        self._turn = 0
        self._done = False
        self._failure: str | None = None
        self._answer: list[str] = []
        self._tool_inputs: dict[str, tuple[str, JsonDict]] = {}

    @property
    def turn_done(self) -> bool:
        """True once the current run produced its terminal event."""
        return self._done

    def start_turn(self) -> None:
        """Reset the per-run state; the session id and model are kept."""
        self._turn += 1
        self._done = False
        self._failure = None
        self._answer = []
        self._tool_inputs.clear()

    def _base(self) -> JsonDict:
        return {
            "body": self.body,
            "native_session_id": self.session_id,
            "turn_id": f"run-{self._turn}",
        }

    # -- input -----------------------------------------------------------------------

    def feed(self, line: str) -> list[Event]:
        """Events for one stdout line."""
        try:
            msg = json.loads(line)
        except ValueError:
            return [Unknown(raw=line, native_type="non_json", **self._base())]
        if not isinstance(msg, dict):
            return [Unknown(raw=line, native_type="non_object", **self._base())]
        kind = msg.get("type")
        handler = _HANDLERS.get(kind) if isinstance(kind, str) else None
        if handler is None:
            return [Unknown(raw=line, native_type=str(kind), **self._base())]
        return handler(self, msg, line)

    def _init(self, msg: JsonDict, raw: str) -> list[Event]:
        session = _str(msg.get("session_id"))
        self.model = _str(msg.get("model")) or self.model
        if session is None or session == self.session_id:
            return []
        self.session_id = session
        return [
            SessionStarted(model=self.model, cwd=self.cwd, permission_mode=None, **self._base())
        ]

    def _message(self, msg: JsonDict, raw: str) -> list[Event]:
        if msg.get("role") != "assistant":
            return []
        text = msg.get("content")
        if not isinstance(text, str):
            return [Unknown(raw=raw, native_type="message", **self._base())]
        self._answer.append(text)
        if msg.get("delta"):
            return [TextDelta(text=text, **self._base())]
        return [Text(text=text, **self._base())]

    def _tool_use(self, msg: JsonDict, raw: str) -> list[Event]:
        call_id, name = _str(msg.get("tool_id")), _str(msg.get("tool_name"))
        if call_id is None or name is None:
            return [Unknown(raw=raw, native_type="tool_use", **self._base())]
        params = msg.get("parameters")
        params = params if isinstance(params, dict) else {}
        self._tool_inputs[call_id] = (name, params)
        # Text before a tool call is narration; the answer is what comes after the last one.
        self._answer = []
        events: list[Event] = [
            ToolCall(
                call_id=call_id,
                tool=normalize_tool(name),
                native_tool=name,
                input=params,
                **self._base(),
            )
        ]
        if name == "write_todos":
            events += _todo_plan(params, self._base())
        return events

    def _tool_result(self, msg: JsonDict, raw: str) -> list[Event]:
        call_id = _str(msg.get("tool_id"))
        if call_id is None:
            return [Unknown(raw=raw, native_type="tool_result", **self._base())]
        status = _str(msg.get("status")) or "success"
        events: list[Event] = []
        if status == "success":
            events += self._file_change(call_id)
        output = _str(msg.get("output")) or ""
        error = msg.get("error")
        if not output and isinstance(error, dict):
            output = _str(error.get("message")) or ""
        events.append(
            ToolResult(
                call_id=call_id,
                output=output,
                is_error=status != "success",
                status=status,
                **self._base(),
            )
        )
        return events

    def _file_change(self, call_id: str) -> list[Event]:
        name, params = self._tool_inputs.get(call_id, ("", {}))
        path = _str(params.get("file_path"))
        if name not in _WRITERS or path is None:
            return []
        return [FileChange(call_id=call_id, path=path, kind=_WRITERS[name], **self._base())]

    def _error(self, msg: JsonDict, raw: str) -> list[Event]:
        text = _str(msg.get("message")) or raw
        severity = _str(msg.get("severity")) or "error"
        if severity == "error":
            self._failure = text
            return []
        return [Notice(kind=severity, message=text, **self._base())]

    def _result(self, msg: JsonDict, raw: str) -> list[Event]:
        if self._done:
            return [Unknown(raw=raw, native_type="result", **self._base())]
        self._done = True
        stats = msg.get("stats")
        stats = stats if isinstance(stats, dict) else {}
        usage = _usage(stats)
        if msg.get("status") == "success":
            duration = stats.get("duration_ms")
            return [
                TurnCompleted(
                    result="".join(self._answer) or None,
                    stop_reason="end_turn",
                    usage=usage,
                    duration_ms=duration if isinstance(duration, int) else None,
                    **self._base(),
                )
            ]
        error = msg.get("error")
        text = _str(error.get("message")) if isinstance(error, dict) else None
        info = result_error(text or self._failure or "Gemini run failed without a message")
        return [TurnFailed(error=info, usage=usage, terminal_reason="result_error", **self._base())]

    # -- the end of a run ------------------------------------------------------------

    def finish(
        self, exit_code: int | None, stderr_tail: str, *, stopped: ErrorInfo | None = None
    ) -> list[Event]:
        """The terminal event for a run that ended without one on stdout.

        ``stopped`` is why Chorus ended the run itself (interrupt, deadline), if it did.
        """
        if self._done:
            return []
        self._done = True
        if stopped is not None:
            info, reason = stopped, stopped.code.value
        elif self._failure is not None:
            info, reason = result_error(self._failure, exit_code), "error_event"
        else:
            info, reason = exit_error(exit_code, stderr_tail), "exit"
        return [TurnFailed(error=info, terminal_reason=reason, **self._base())]


def _todo_plan(params: JsonDict, base: JsonDict) -> list[Event]:
    todos = params.get("todos")
    if not isinstance(todos, list):
        return []
    entries = [
        PlanEntry(content=str(t.get("description", "")), status=str(t.get("status", "pending")))
        for t in todos
        if isinstance(t, dict)
    ]
    return [Plan(entries=entries, **base)]


def _usage(stats: JsonDict) -> Usage | None:
    if not stats:
        return None
    return Usage(
        input_tokens=_int(stats.get("input_tokens")),
        output_tokens=_int(stats.get("output_tokens")),
        cached_input_tokens=_int(stats.get("cached")),
    )


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


_HANDLERS = {
    "init": GeminiStreamCodec._init,
    "message": GeminiStreamCodec._message,
    "tool_use": GeminiStreamCodec._tool_use,
    "tool_result": GeminiStreamCodec._tool_result,
    "error": GeminiStreamCodec._error,
    "result": GeminiStreamCodec._result,
}
