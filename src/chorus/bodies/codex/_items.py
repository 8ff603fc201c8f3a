"""App-server thread items -> the fields of canonical tool events.

Pure functions over the generated item models; the codec stamps ids and builds
the events. Item types that are not tool uses (messages, reasoning, plans,
compaction) are handled by the codec itself.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel

from chorus.bodies._tools import normalize_tool
from chorus.bodies.codex import _schema as s
from chorus.bodies.codex._wire import dumps, to_wire
from chorus.events import JsonDict


def change_dict(change: s.FileUpdateChange) -> JsonDict:
    """A file change as plain data: path, kind (add/delete/update/move) and diff."""
    kind = change.kind
    if isinstance(kind, s.UpdatePatchChangeKind) and kind.move_path:
        return {
            "path": change.path,
            "kind": "move",
            "diff": change.diff,
            "move_path": kind.move_path,
        }
    return {"path": change.path, "kind": kind.type, "diff": change.diff}


def _call(call_id: str, native: str, input_: JsonDict, title: str) -> JsonDict:
    tool = "mcp" if native.startswith("mcp__") else normalize_tool(native)
    return {
        "call_id": call_id,
        "tool": tool,
        "native_tool": native,
        "input": input_,
        "title": title,
    }


def tool_call_fields(item: Any) -> JsonDict | None:
    """ToolCall fields announcing ``item``, for the item types that are tool uses."""
    if isinstance(item, s.CommandExecutionThreadItem):
        return _call(
            item.id, "commandExecution", {"command": item.command, "cwd": item.cwd}, item.command
        )
    if isinstance(item, s.FileChangeThreadItem):
        changes = [change_dict(c) for c in item.changes]
        paths = ", ".join(str(c["path"]) for c in changes)
        return _call(item.id, "fileChange", {"changes": changes}, f"edit {paths}")
    if isinstance(item, s.McpToolCallThreadItem):
        native = f"mcp__{item.server}__{item.tool}"
        return _call(item.id, native, _as_input(item.arguments), native)
    if isinstance(item, s.DynamicToolCallThreadItem):
        return _call(item.id, item.tool, _as_input(item.arguments), item.tool)
    if isinstance(item, s.WebSearchThreadItem):
        return _call(item.id, "web_search", {"query": item.query}, item.query)
    if isinstance(item, s.ImageViewThreadItem):
        return _call(item.id, "view_image", {"path": item.path}, item.path)
    if isinstance(item, s.CollabAgentToolCallThreadItem):
        collab: JsonDict = {"tool": item.tool, "prompt": item.prompt, "model": item.model}
        return _call(item.id, "collabAgentToolCall", collab, item.tool)
    return None


def _result(call_id: str, output: str, *, error: bool, status: str | None) -> JsonDict:
    return {"call_id": call_id, "output": output, "is_error": error, "status": status}


def tool_result_fields(item: Any) -> JsonDict | None:
    """ToolResult fields closing ``item`` (file changes included), else ``None``."""
    if isinstance(item, s.CommandExecutionThreadItem):
        failed = item.status in ("failed", "declined") or item.exitCode not in (0, None)
        fields = _result(item.id, item.aggregatedOutput or "", error=failed, status=item.status)
        return {**fields, "exit_code": item.exitCode}
    if isinstance(item, s.FileChangeThreadItem):
        return _file_change_result(item)
    if isinstance(item, s.McpToolCallThreadItem):
        output = item.error.message if item.error else content_text(item.result)
        return _result(item.id, output, error=item.status == "failed", status=item.status)
    if isinstance(item, s.DynamicToolCallThreadItem):
        failed = item.status == "failed" or item.success is False
        return _result(item.id, content_text(item.contentItems), error=failed, status=item.status)
    if isinstance(item, s.WebSearchThreadItem):
        output = dumps({"results": item.results}) if item.results else ""
        return _result(item.id, output, error=False, status="completed")
    if isinstance(item, s.ImageViewThreadItem):
        return _result(item.id, item.path, error=False, status="completed")
    if isinstance(item, s.CollabAgentToolCallThreadItem):
        return _result(item.id, "", error=item.status == "failed", status=item.status)
    return None


def _file_change_result(item: s.FileChangeThreadItem) -> JsonDict:
    """The applied diff; a declined patch is a denial, not its (unapplied) diff."""
    if item.status == "declined":
        paths = ", ".join(str(change_dict(c)["path"]) for c in item.changes)
        return _result(item.id, f"patch declined: {paths}", error=True, status="declined")
    output = "\n".join(c.diff for c in item.changes)
    return _result(item.id, output, error=item.status == "failed", status=item.status)


def _as_input(arguments: Any) -> JsonDict:
    return dict(arguments) if isinstance(arguments, dict) else {"arguments": arguments}


def content_text(content: Any) -> str:
    """Flatten MCP / dynamic-tool content parts to text (non-text parts as JSON)."""
    if content is None:
        return ""
    parts = content.content if isinstance(content, s.McpToolCallResult) else content
    texts: list[str] = []
    for part in parts:
        data = to_wire(part) if isinstance(part, BaseModel) else part
        if isinstance(data, dict) and isinstance(data.get("text"), str):
            texts.append(data["text"])
        else:
            texts.append(json.dumps(data) if isinstance(data, dict | list) else str(data))
    return "\n".join(texts)
