"""Shared wire-level types for the three model APIs the fake server speaks."""

from __future__ import annotations

import itertools
import json
import re
import uuid
from dataclasses import dataclass, field
from typing import Any, Literal

Api = Literal["anthropic", "openai", "gemini"]

# Framework text the CLIs inject as whole user parts: <system-reminder>,
# <environment_context>, <session_context>, ... A part that is exactly one such
# element is not something the user typed.
_WRAPPER = re.compile(r"^\s*<([A-Za-z_][\w-]*)(?:\s[^>]*)?>.*</\1>\s*$", re.DOTALL)


def is_injected_text(text: str) -> bool:
    """True when ``text`` is one wrapper element the CLI injected (not user text)."""
    return _WRAPPER.match(text) is not None


@dataclass(frozen=True, slots=True)
class SseEvent:
    """One encoded SSE event; ``paced`` events are preceded by the reply's delay."""

    data: bytes
    paced: bool = False


@dataclass(frozen=True, slots=True)
class JsonReply:
    """A complete non-streaming HTTP response with a JSON body."""

    status: int
    body: Any
    headers: tuple[tuple[str, str], ...] = ()

    def encoded(self) -> bytes:
        """The body as UTF-8 JSON bytes."""
        return json.dumps(self.body).encode()


@dataclass(frozen=True, slots=True)
class ToolResult:
    """A tool result the CLI sent back to the model.

    ``name`` is the tool's name when it can be resolved from the matching call in
    the same request, else ``None``; ``content`` is the result flattened to text.
    """

    call_id: str | None
    name: str | None
    content: str
    is_error: bool = False


@dataclass(slots=True)
class RenderContext:
    """Per-response facts a renderer needs: model name, CLI cwd, id source."""

    model: str
    cwd: str | None = None
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def new_id(self, prefix: str) -> str:
        """A fresh id such as ``toolu_<hex>`` that is unique across runs."""
        return f"{prefix}_{uuid.uuid4().hex[:20]}{next(self._ids)}"

    def resolve(self, path: str) -> str:
        """``path`` made absolute against the CLI's cwd when it is relative and cwd is known."""
        if path.startswith("/") or self.cwd is None:
            return path
        return f"{self.cwd.rstrip('/')}/{path}"


def dumps(obj: Any) -> str:
    """Compact JSON the way real APIs send it."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def text_of(value: Any) -> str:
    """Flatten a tool-result payload (str, list of text parts, or JSON) to text."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts = [text_of(v.get("text") if isinstance(v, dict) else v) for v in value]
        return "".join(parts)
    return dumps(value)


@dataclass(frozen=True, slots=True)
class SseMessage:
    """One parsed server-sent event: its ``event:`` name (or ``None``) and JSON ``data``."""

    event: str | None
    data: Any


def parse_sse(stream: bytes | str) -> list[SseMessage]:
    """Parse an SSE body into messages, accepting ``\\n`` or ``\\r\\n`` line ends.

    ``data`` is the JSON-decoded payload (the raw string if it is not JSON).
    """
    text = stream.decode() if isinstance(stream, bytes) else stream
    messages: list[SseMessage] = []
    for block in re.split(r"\r?\n\r?\n", text.replace("\r\n", "\n")):
        event: str | None = None
        data_lines: list[str] = []
        for line in block.split("\n"):
            if line.startswith("event:"):
                event = line[len("event:") :].strip()
            elif line.startswith("data:"):
                data_lines.append(line[len("data:") :].lstrip())
        if not data_lines:
            continue
        raw = "\n".join(data_lines)
        try:
            messages.append(SseMessage(event, json.loads(raw)))
        except ValueError:
            messages.append(SseMessage(event, raw))
    return messages
