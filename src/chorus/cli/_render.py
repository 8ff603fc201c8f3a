"""Render a job's events (as JSON dicts) for a person, each thing once.

Works on the wire form, not on the pydantic models, so that the everyday
commands print without loading pydantic. :class:`Renderer` keeps the little
state needed to show every body the same way: text streams as its deltas
arrive and is not printed again when the whole message follows; thinking
likewise; a tool call announced twice (ACP sends ``{}`` first) is shown once.

Output goes through a ``Write`` callback taking styled segments, so the same
renderer feeds rich on a terminal and plain text elsewhere.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable

#: ``typing`` is not imported at run time: it costs the fast path milliseconds.
TYPE_CHECKING = False

if TYPE_CHECKING:
    from typing import Any

#: ``write(segments, end)``: segments are (rich style, text) pairs.
Segments = list[tuple[str, str]]
Write = Callable[[Segments, str], None]

_COMMAND_TAGS = re.compile(r"</?local-command-std(?:out|err)>|</?command-(?:name|message|args)>")
#: Not shown as lines: protocol traffic, and the meter's per-request records (they
#: land mid-answer; their usage and cost are in the turn's ``done`` line and
#: ``chorus usage``), which would break a streamed line in two.
_HIDDEN = frozenset(
    {"status", "control_request", "control_response", "tool_output_delta", "metered"}
)


def clean(text: str) -> str:
    """Text as a person should read it: without Claude's slash-command wrapper tags."""
    return _COMMAND_TAGS.sub("", text)


def short(value: object, limit: int = 160) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = text.replace("\n", "⏎ ")
    return text if len(text) <= limit else text[: limit - 1] + "…"


class Renderer:
    """Feeds events in order; writes one line (or one streamed line) per thing worth showing."""

    def __init__(self, write: Write) -> None:
        self._write = write
        self._open: str | None = None  # "text" or "thinking" while a streamed line is open
        self._streamed: set[tuple[str, str]] = set()  # (kind, message id) already streamed
        self._tools: dict[str, bool] = {}  # call id -> shown with its input

    def feed(self, event: dict[str, Any]) -> None:
        kind = event.get("type", "")
        if kind in ("text_delta", "thinking") and self._stream(event):
            return
        if kind in _HIDDEN or _is_noise(event):
            return
        if kind in ("text", "thinking") and self._was_streamed(event):
            return
        self.close()
        line = self._line(event)
        if line is not None:
            self._write([("dim", f"{event.get('seq', 0):>4} "), *line], "\n")

    def close(self) -> None:
        """End a streamed line (call at the end of a stream, too)."""
        if self._open is not None:
            self._open = None
            self._write([], "\n")

    # -- streaming ------------------------------------------------------------------

    def _stream(self, event: dict[str, Any]) -> bool:
        """Write a delta in place; False for events that are not deltas."""
        kind = "text" if event["type"] == "text_delta" else "thinking"
        if kind == "thinking" and not event.get("delta"):
            return False
        self._streamed.add((kind, event.get("message_id") or ""))
        chunk = clean(event.get("text", ""))
        if self._open != kind:
            self.close()
            label = ("bold", "assistant ") if kind == "text" else ("dim italic", "thinking ")
            self._write([("dim", f"{event.get('seq', 0):>4} "), label], "")
            self._open = kind
        self._write([("" if kind == "text" else "dim", chunk)], "")
        return True

    def _was_streamed(self, event: dict[str, Any]) -> bool:
        key = (event["type"], event.get("message_id") or "")
        if key not in self._streamed:
            return False
        self._streamed.discard(key)
        self.close()
        return True

    # -- one line per event ----------------------------------------------------------

    def _line(self, e: dict[str, Any]) -> Segments | None:
        render = _LINES.get(e.get("type", ""))
        if render is not None:
            return render(e)
        if e.get("type") == "tool_call":
            return self._tool_call(e)
        if e.get("type") == "tool_result":
            return self._tool_result(e)
        return [("dim", str(e.get("type")))]

    def _tool_call(self, e: dict[str, Any]) -> Segments | None:
        call_id, has_input = e.get("call_id", ""), bool(e.get("input"))
        if self._tools.get(call_id) or (call_id in self._tools and not has_input):
            return None
        if not has_input and call_id:
            self._tools[call_id] = False  # shown when its input (or its result) arrives
            return None
        self._tools[call_id] = True
        return _tool_line(e)

    def _tool_result(self, e: dict[str, Any]) -> Segments:
        colour = "red" if e.get("is_error") else "green"
        line: Segments = [(colour, "result "), ("", short(e.get("output") or "(no output)"))]
        call_id = e.get("call_id", "")
        if self._tools.get(call_id) is False:
            self._tools[call_id] = True
            return [("magenta", "tool "), ("", f"{call_id} "), *line]
        return line


def _tool_line(e: dict[str, Any]) -> Segments:
    title = e.get("title")
    head = f"{e.get('tool')} ({e.get('native_tool')}) " + (f"{title}: " if title else "")
    return [("magenta", "tool "), ("", head), ("dim", short(e.get("input") or {}))]


def _session(e: dict[str, Any]) -> Segments:
    tail = " ".join(f"{k}={e[k]}" for k in ("model", "cwd") if e.get(k))
    return [("cyan", "session "), ("", f"{e.get('body', '')} {tail}".rstrip())]


def _job_ended(e: dict[str, Any]) -> Segments:
    state = e.get("state", "?")
    colour = {"succeeded": "green", "cancelled": "yellow"}.get(state, "red")
    err = e.get("error") or {}
    why = f": {err.get('code')}: {short(err.get('message', ''))}" if err else ""
    left = e.get("failed_over_from") or []
    on = f" on {e.get('body')} (after {', '.join(left)})" if left else ""
    return [(colour, f"job {state}"), ("", on + why)]


def _turn_completed(e: dict[str, Any]) -> Segments:
    usage = e.get("usage") or {}
    tokens = f" in={usage.get('input_tokens', 0)} out={usage.get('output_tokens', 0)}"
    cost = f" ${e['cost_usd']:.4f}" if e.get("cost_usd") is not None else ""
    return [("bold green", "done"), ("", (tokens if usage else "") + cost)]


def _error_line(label: str, e: dict[str, Any]) -> Segments:
    err = e.get("error") or {}
    return [("bold red", f"{label} "), ("", f"{err.get('code')}: {short(err.get('message', ''))}")]


def _decision(e: dict[str, Any]) -> Segments:
    colour = "green" if e.get("decision") == "allow" else "red"
    why = f" — {e['reason']}" if e.get("reason") else ""
    return [(colour, str(e.get("decision"))), ("", why)]


def _flag(e: dict[str, Any]) -> Segments:
    """A flag raised, decided or waiting: its id, and how to answer it."""
    name = str(e.get("name"))
    head = [
        ("bold yellow", f"flag {e.get('flag_id') or ''} "),
        ("", f"{name}: {clean(e.get('text', ''))}"),
    ]
    if name in ("raised", "approval"):
        hint = f" — default {e.get('default')}; answer: {e.get('answer_hint')}"
        return [*head, ("dim", hint)]
    return [*head, ("dim", f" → {e.get('choice')}")]


_LINES: dict[str, Callable[[dict[str, Any]], Segments]] = {
    "flag": _flag,
    "session_started": _session,
    "job_ended": _job_ended,
    "turn_completed": _turn_completed,
    "turn_failed": lambda e: _error_line("failed", e),
    "text": lambda e: [("bold", "assistant "), ("", clean(e.get("text", "")))],
    "thinking": lambda e: [("dim italic", "thinking "), ("dim", short(e.get("text", "")))],
    "file_change": lambda e: [("magenta", "file "), ("", f"{e.get('kind')} {e.get('path')}")],
    "permission_request": lambda e: [
        ("yellow", "permission? "),
        ("", f"{e.get('tool')} {short(e.get('input'))}"),
    ],
    "permission_decision": _decision,
    "retry_notice": lambda e: [
        ("yellow", "retry "),
        ("", f"attempt {e.get('attempt')}: {(e.get('error') or {}).get('code')}"),
    ],
    "usage": lambda e: [
        ("dim", f"usage in={e['usage'].get('input_tokens')} out={e['usage'].get('output_tokens')}")
    ],
    "notice": lambda e: [("yellow", "note "), ("", str(e.get("message")))],
    "compatibility_warning": lambda e: [("yellow", "note "), ("", str(e.get("message")))],
    "handoff": lambda e: [
        ("bold yellow", "handoff "),
        ("", f"{e.get('from_body')} → {e.get('to_body')} ({(e.get('reason') or {}).get('code')})"),
    ],
    "routed": lambda e: [
        ("cyan", "routed "),
        ("", f"to {e.get('to_body')}: {e.get('reason')}"),
        ("dim", "".join(f"; {s}" for s in e.get("skipped") or [])),
        ("dim", "" if e.get("failover", True) else " (no failover)"),
    ],
    "session_ended": lambda e: [("dim", f"session ended: {e.get('reason')}")],
    "unknown": lambda e: [("dim", f"unknown {e.get('native_type')}")],
}
#: Native bookkeeping a person need not see (kept in the log and in --format json).
_NOISE = {
    "mcpServer/startupStatus/updated",
}


#: Notes a CLI repeats at every start that say nothing about the job (the log keeps
#: them): Codex's own sandbox warning (Chorus runs it inside its own bubblewrap
#: sandbox; `chorus doctor` reports bubblewrap).
_NOISY_NOTES = ("Codex could not find bubblewrap",)


def _is_noise(event: dict[str, Any]) -> bool:
    if event.get("type") == "unknown":
        return event.get("native_type") in _NOISE
    if event.get("type") == "notice":
        return str(event.get("message", "")).startswith(_NOISY_NOTES)
    return False


# -- sinks -------------------------------------------------------------------------------


def plain_writer(stream: Any = None) -> Write:
    """Write segments as plain text (no colour, no rich)."""

    def write(segments: Segments, end: str) -> None:
        out = stream or sys.stdout
        out.write("".join(text for _, text in segments) + end)
        out.flush()

    return write


def rich_writer(stderr: bool = False) -> Write:
    """Write segments with rich styles (loads rich: only for a terminal)."""
    from rich.console import Console
    from rich.text import Text

    console = Console(stderr=stderr, highlight=False, soft_wrap=True)

    def write(segments: Segments, end: str) -> None:
        console.print(Text.assemble(*[(text, style) for style, text in segments]), end=end)

    return write


def print_event(console: Any, event: Any) -> None:
    """One event (a model) on a rich console, without streaming state (demo, repl)."""
    from chorus.events import event_to_json

    renderer = _RENDERERS.get(id(console))
    if renderer is None:
        renderer = _RENDERERS[id(console)] = Renderer(_console_writer(console))
    renderer.feed(json.loads(event_to_json(event)))


_RENDERERS: dict[int, Renderer] = {}


def _console_writer(console: Any) -> Write:
    from rich.text import Text

    def write(segments: Segments, end: str) -> None:
        text = Text.assemble(*[(t, s) for s, t in segments])
        console.print(text, end=end, highlight=False, soft_wrap=True)

    return write


# -- tables ------------------------------------------------------------------------------


def _body_now(session: dict[str, Any]) -> str:
    """The body a session runs on, and the one it began on if it moved (failover)."""
    now = session.get("active_body") or session["body"]
    return now if now == session["body"] else f"{now} (after {session['body']})"


def session_table(rows: list[dict[str, Any]], ids: dict[str, str]) -> None:
    """``chorus sessions list`` as a table on stdout (loads rich)."""
    from datetime import datetime

    from rich.console import Console
    from rich.table import Table

    console = Console()
    if not rows:
        console.print("no sessions recorded")
        return

    def when(ts: float) -> str:
        return datetime.fromtimestamp(ts).isoformat(sep=" ", timespec="seconds")

    table = Table("id", "body", "model", "state", "events", "created", "updated")
    for s in rows:
        cells = [ids[s["id"]], _body_now(s), s["model"] or "-", s["state"], str(s["last_seq"])]
        table.add_row(*cells, when(s["created_at"]), when(s["updated_at"]))
    console.print(table)
