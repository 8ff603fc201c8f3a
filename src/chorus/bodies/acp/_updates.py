"""``session/update`` notifications and tool calls, mapped to canonical events.

Pure functions over the ``acp.schema`` models plus one stateful helper,
:class:`ToolTracker`, which remembers the tool calls of a session so that every
:class:`ToolResult` follows a :class:`ToolCall` even when the agent skipped the
``tool_call`` (Gemini sends none for a call it asked permission for).

Mapping (native ``sessionUpdate`` → events):

- ``agent_message_chunk`` → :class:`TextDelta` (a quirk-marked mode
  announcement → ``StatusChanged("mode")``); ``agent_thought_chunk`` →
  :class:`Thinking`; ``user_message_chunk`` (history replay) → :class:`Unknown`.
- ``tool_call`` / ``tool_call_update`` → :class:`ToolCall` when first seen;
  a ``completed``/``failed`` status → :class:`FileChange` per diff (completed
  only) and :class:`ToolResult`; other updates → ``StatusChanged("tool_call")``.
- ``plan`` → :class:`Plan`; ``current_mode_update`` → ``StatusChanged("mode")``;
  ``available_commands_update``, ``config_option_update``,
  ``session_info_update``, ``usage_update`` and newer plan kinds →
  :class:`StatusChanged` carrying the native update; anything else → :class:`Unknown`.
"""

from __future__ import annotations

import difflib
import json
from collections import OrderedDict
from typing import Any

from acp import schema

from chorus.bodies._permissions import PermissionAsk
from chorus.bodies._tools import normalize_tool
from chorus.bodies.acp._quirks import AcpQuirks
from chorus.events import (
    Event,
    FileChange,
    JsonDict,
    Plan,
    PlanEntry,
    StatusChanged,
    TextDelta,
    Thinking,
    ToolCall,
    ToolResult,
    Unknown,
)

#: Largest unified diff kept on a FileChange event (events are capped at 1 MiB).
MAX_DIFF_CHARS = 256 << 10
_TERMINAL_STATUS = ("completed", "failed")
_STATUS_KINDS = {
    "available_commands_update": "available_commands",
    "config_option_update": "config_options",
    "session_info_update": "session_info",
    "usage_update": "context_usage",
    "plan_update": "plan_update",
    "plan_removed": "plan_removed",
}

ToolCallLike = schema.ToolCall | schema.ToolCallUpdate


class ToolTracker:
    """The tool calls of one session: names, inputs and which have finished.

    Bounded: beyond ``max_calls`` the oldest entries are forgotten (a late
    update for one of those is reported as a new call).
    """

    def __init__(self, quirks: AcpQuirks, *, max_calls: int = 10_000) -> None:
        self._quirks = quirks
        self._max = max_calls
        self._calls: OrderedDict[str, ToolCall] = OrderedDict()
        self._finished: set[str] = set()

    def names(self, call: ToolCallLike) -> tuple[str, str]:
        """``(tool, native_tool)`` for a call: the agent's own tool name when it sends
        one (``_meta.<agent>.toolName``, or in the id per quirk), else what an earlier
        message of the same call said, else the ACP ``kind``."""
        native = _meta_tool_name(call.field_meta) or self._name_from_id(call.tool_call_id)
        earlier = self._calls.get(call.tool_call_id)
        if native is None and earlier is not None:
            return earlier.tool, earlier.native_tool
        native = native or call.kind or "other"
        tool = normalize_tool(self._own_name(native))
        if tool == "other" and call.kind:
            tool = normalize_tool(call.kind)
        return tool, native

    def _own_name(self, native: str) -> str:
        """``native`` without the agent's own-tool prefix (``mcp__acp__Read`` → ``Read``)."""
        prefix = self._quirks.own_tool_prefix
        return native.removeprefix(prefix) if prefix else native

    def _name_from_id(self, call_id: str) -> str | None:
        sep = self._quirks.tool_id_separator
        if sep and sep in call_id:
            return call_id.split(sep, 1)[0] or None
        return None

    def known(self, call_id: str) -> ToolCall | None:
        return self._calls.get(call_id)

    def started(self, call: ToolCallLike, base: JsonDict) -> list[Event]:
        """A :class:`ToolCall` the first time ``call`` is seen; again, once, when the
        first one had an empty input and this message has one (agents that stream
        the input announce the call before they know it); else nothing."""
        earlier = self._calls.get(call.tool_call_id)
        inputs = tool_input(call)
        if earlier is not None and (earlier.input or not inputs or self.finished(earlier)):
            return []
        tool, native = self.names(call)
        event = ToolCall(
            call_id=call.tool_call_id,
            tool=tool,
            native_tool=native,
            input=inputs,
            title=call.title or (earlier.title if earlier else None),
            **base,
        )
        self._remember(event)
        return [event]

    def finished(self, call: ToolCall) -> bool:
        return call.call_id in self._finished

    def finish(self, call_id: str) -> bool:
        """Mark ``call_id`` finished; False if it already was (no second result)."""
        if call_id in self._finished:
            return False
        self._finished.add(call_id)
        return True

    def _remember(self, event: ToolCall) -> None:
        self._calls[event.call_id] = event
        while len(self._calls) > self._max:
            old, _ = self._calls.popitem(last=False)
            self._finished.discard(old)


# -- session/update ---------------------------------------------------------------


def map_update(
    update: Any, tools: ToolTracker, quirks: AcpQuirks, base: JsonDict, raw: str
) -> list[Event]:
    """Events for one parsed ``session/update`` payload (``SessionNotification.update``)."""
    kind = update.session_update
    if kind == "agent_message_chunk":
        return _message_chunk(update, quirks, base, raw)
    if kind == "agent_thought_chunk":
        return _thought_chunk(update, base, raw)
    if kind in ("tool_call", "tool_call_update"):
        return tool_events(update, tools, base)
    if kind == "plan":
        return [Plan(entries=[_plan_entry(e) for e in update.entries], **base)]
    if kind == "current_mode_update":
        return [mode_changed(update.current_mode_id, base, source="current_mode_update")]
    if kind in _STATUS_KINDS:
        return [StatusChanged(state=_STATUS_KINDS[kind], detail=_dump(update), **base)]
    return [Unknown(raw=raw, native_type=kind, **base)]


def mode_changed(mode: str, base: JsonDict, *, source: str) -> StatusChanged:
    """The event for the agent announcing its current mode."""
    return StatusChanged(state="mode", detail={"mode": mode, "source": source}, **base)


def mode_announcement(text: str, quirks: AcpQuirks) -> str | None:
    """The mode id when ``text`` is a quirk-marked mode announcement, else ``None``."""
    prefix = quirks.mode_update_prefix
    if prefix and text.startswith(prefix):
        return text[len(prefix) :].strip()
    return None


def _message_chunk(update: Any, quirks: AcpQuirks, base: JsonDict, raw: str) -> list[Event]:
    text = _chunk_text(update.content)
    if text is None:
        return [Unknown(raw=raw, native_type="agent_message_chunk", **base)]
    if not text:
        return []  # claude-code-acp opens every message with an empty chunk
    mode = mode_announcement(text, quirks)
    if mode is not None:
        return [mode_changed(mode, base, source="message")]
    return [TextDelta(text=text, message_id=update.message_id, **base)]


def _thought_chunk(update: Any, base: JsonDict, raw: str) -> list[Event]:
    text = _chunk_text(update.content)
    if text is None:
        return [Unknown(raw=raw, native_type="agent_thought_chunk", **base)]
    return [Thinking(text=text, delta=True, message_id=update.message_id, **base)]


def _chunk_text(content: Any) -> str | None:
    return content.text if getattr(content, "type", None) == "text" else None


def _plan_entry(entry: schema.PlanEntry) -> PlanEntry:
    return PlanEntry(content=entry.content, status=entry.status, priority=entry.priority)


# -- tool calls ----------------------------------------------------------------------


def tool_events(call: ToolCallLike, tools: ToolTracker, base: JsonDict) -> list[Event]:
    """Events for a ``tool_call`` or ``tool_call_update``."""
    events = tools.started(call, base)
    status = call.status
    if status in _TERMINAL_STATUS:
        if tools.finish(call.tool_call_id):
            events += _file_changes(call, base) if status == "completed" else []
            events.append(tool_result(call, base))
    elif not events:
        events.append(StatusChanged(state="tool_call", detail=_dump(call), **base))
    return events


def tool_result(call: ToolCallLike, base: JsonDict) -> ToolResult:
    """The :class:`ToolResult` of a finished call: its text content, else the text
    found in ``rawOutput`` (codex-acp: ``aggregated_output``, ``exit_code``)."""
    raw = call.raw_output
    output = "\n".join(content_texts(call.content)) or _raw_text(raw)
    exit_code = raw.get("exit_code") if isinstance(raw, dict) else None
    return ToolResult(
        call_id=call.tool_call_id,
        output=output,
        is_error=call.status == "failed",
        exit_code=exit_code if isinstance(exit_code, int) else None,
        status=call.status,
        **base,
    )


_OUTPUT_KEYS = ("formatted_output", "aggregated_output", "output", "stdout")


def _raw_text(raw: Any) -> str:
    if raw is None:
        return ""
    if isinstance(raw, str):
        return raw
    if isinstance(raw, dict):
        for key in _OUTPUT_KEYS:
            if isinstance(raw.get(key), str):
                return str(raw[key])
    return json.dumps(raw, ensure_ascii=False)


def _file_changes(call: ToolCallLike, base: JsonDict) -> list[Event]:
    return [
        FileChange(
            call_id=call.tool_call_id,
            path=item.path,
            kind=_diff_kind(item),
            diff=_unified(item),
            **base,
        )
        for item in call.content or ()
        if getattr(item, "type", None) == "diff"
    ]


def _diff_kind(item: Any) -> str:
    meta = item.field_meta or {}
    if isinstance(meta.get("kind"), str):
        return str(meta["kind"])
    if item.old_text is None:
        return "add"
    return "delete" if item.new_text == "" else "modify"


def _unified(item: Any) -> str:
    old = (item.old_text or "").splitlines(keepends=True)
    new = item.new_text.splitlines(keepends=True)
    diff = "".join(difflib.unified_diff(old, new, f"a{item.path}", f"b{item.path}"))
    return diff[:MAX_DIFF_CHARS]


def content_texts(content: Any) -> list[str]:
    """The text of each ``content`` item of a tool call (diffs and terminals skipped)."""
    texts: list[str] = []
    for item in content or ():
        if getattr(item, "type", None) == "content":
            text = _chunk_text(item.content)
            if text is not None:
                texts.append(text)
    return texts


def tool_input(call: ToolCallLike) -> JsonDict:
    """What a policy sees as the tool's input: ``rawInput`` when the agent sends an
    object, else what can be read off the call (title, command, paths, text, diffs)."""
    if isinstance(call.raw_input, dict):
        return dict(call.raw_input)
    data: JsonDict = {}
    if call.title:
        data["title"] = call.title
        if call.kind == "execute":
            # Agents without rawInput (Gemini) put the command line in the title.
            data["command"] = call.title
    paths = [loc.path for loc in call.locations or ()]
    if paths:
        data["paths"] = paths
    texts = content_texts(call.content)
    if texts:
        data["description"] = "\n".join(texts)
    diffs = [_diff_dict(i) for i in call.content or () if getattr(i, "type", None) == "diff"]
    if diffs:
        data["diffs"] = diffs
    return data


def _diff_dict(item: Any) -> JsonDict:
    return {"path": item.path, "old_text": item.old_text, "new_text": item.new_text}


def permission_ask(call: ToolCallLike, tools: ToolTracker, body: str, cwd: str) -> PermissionAsk:
    """The :class:`PermissionAsk` for the tool call of a ``session/request_permission``."""
    tool, native = tools.names(call)
    inputs = tool_input(call)
    paths = tuple(loc.path for loc in call.locations or ())
    paths += tuple(d["path"] for d in inputs.get("diffs", ()) if d["path"] not in paths)
    description = inputs.get("description")
    return PermissionAsk(
        body=body,
        tool=tool,
        native_tool=native,
        input=inputs,
        call_id=call.tool_call_id,
        description=description if isinstance(description, str) else call.title,
        cwd=cwd,
        paths=paths,
    )


def _meta_tool_name(meta: Any) -> str | None:
    # claude-code-acp: {"_meta": {"claudeCode": {"toolName": "Bash"}}}
    if not isinstance(meta, dict):
        return None
    for value in meta.values():
        if isinstance(value, dict) and isinstance(value.get("toolName"), str):
            return str(value["toolName"])
    return None


def _dump(model: Any) -> JsonDict:
    dumped = model.model_dump(by_alias=True, exclude_none=True, mode="json")
    return dumped if isinstance(dumped, dict) else {"value": dumped}
