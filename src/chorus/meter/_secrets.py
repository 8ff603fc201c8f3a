"""Secrets stay home (sans-I/O): a known secret value in a model request's body is
replaced by ``[SECRET:<name>]`` before the request leaves the machine, and in the
answer the placeholders of the names hidden in that very request are put back in
the model's tool-call arguments (so the tool gets the value, the provider never
sees it). Text the model writes keeps the placeholder.

- :class:`SecretBook`: the known values by name; :meth:`SecretBook.hide` a body.
- :class:`ArgStream`: restores placeholders in a tool call's arguments as they stream
  in pieces, holding back just the tail that may be the start of a placeholder.
- :class:`Restorer`: an answer's bytes in (SSE in any chunking, or JSON), the same
  bytes out but for the tool-call arguments it restored (Anthropic ``tool_use``
  input, OpenAI Responses ``function_call`` arguments, ``custom_tool_call`` input
  and ``local_shell_call`` commands, Gemini ``functionCall`` args).

Only names hidden in the request are restored: a model cannot name a secret it was
never shown and have a tool receive it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from chorus.meter._usage import Api

#: ``[SECRET:<name>]``: what a model sees instead of a secret's value.
PLACEHOLDER = re.compile(r"\[SECRET:([A-Za-z0-9_.-]{1,128})\]")
_NAME = re.compile(r"[A-Za-z0-9_.-]{1,128}")
#: A value of these characters only has one form in any JSON encoder's output
#: (none escapes them; ``"``, ``\``, ``/``, ``<``, ``>``, ``&``, ``'`` some do).
_PLAIN = re.compile(r"[A-Za-z0-9 !#$%()*+,.:;=?@\[\]^_`{|}~-]+")
#: Values shorter than this are not hidden (they would shred ordinary text).
MIN_SECRET_CHARS = 6


def placeholder(name: str) -> str:
    return f"[SECRET:{name}]"


def _json_escaped(value: str, ascii_only: bool) -> str:
    return json.dumps(value, ensure_ascii=ascii_only)[1:-1]


class SecretBook:
    """The secret values Chorus knows, by name (names: letters, digits, ``_.-``)."""

    def __init__(self, values: Mapping[str, str] | None = None) -> None:
        kept = {n: v for n, v in (values or {}).items() if _keepable(n, v)}
        # longest first: a value that contains another is hidden whole
        self.values: dict[str, str] = dict(sorted(kept.items(), key=lambda i: -len(i[1])))
        self._forms = _forms(self.values)
        #: Whether every value stands in a JSON body in one form only (printable ASCII
        #: no encoder escapes): its bytes then are its every occurrence, and a body is
        #: not parsed to find them.
        self._plain = all(_PLAIN.fullmatch(v) for v in self.values.values())

    def __bool__(self) -> bool:
        return bool(self.values)

    def hide(self, body: bytes) -> tuple[bytes, dict[str, str]]:
        """``body`` with every known value replaced, and the ``{name: value}`` hidden."""
        if not self.within(body):
            return body, {}
        hidden: dict[str, str] = {}
        out = body if self._plain else self._parsed(body, hidden)
        return self._sub(out, hidden), hidden

    def _parsed(self, body: bytes, hidden: dict[str, str]) -> bytes:
        """``body``'s JSON with the values hidden in its strings however they were
        escaped (as it was when it is not JSON)."""
        try:
            data = json.loads(body)
        except ValueError:
            return body
        data = self._walk(data, hidden)
        return json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode()

    def within(self, body: bytes) -> bool:
        """Whether any known value may be in ``body`` (most bodies: no, and then they
        are not parsed at all): each form of each value looked for as bytes, one by
        one (bytes' own search: 3 to 10 times faster than one pass of the pattern's
        alternatives over a 56 KB body, for 2 to 30 values)."""
        return any(form in body for form in self._forms)

    def _walk(self, value: Any, hidden: dict[str, str]) -> Any:
        if isinstance(value, str):
            return self._text(value, hidden)
        if isinstance(value, list):
            return [self._walk(v, hidden) for v in value]
        if isinstance(value, dict):
            return {self._text(k, hidden): self._walk(v, hidden) for k, v in value.items()}
        return value

    def _text(self, text: str, hidden: dict[str, str]) -> str:
        for name, value in self.values.items():
            if value in text:
                text = text.replace(value, placeholder(name))
                hidden[name] = value
        return text

    def _sub(self, body: bytes, hidden: dict[str, str]) -> bytes:
        """Every form left (all of them for plain values; a body that is not JSON, an
        odd escape) replaced as bytes, the longest first (a value that contains
        another is hidden whole)."""
        for form, name in self._forms.items():
            if form in body:
                body = body.replace(form, placeholder(name).encode())
                hidden[name] = self.values[name]
        return body


def _keepable(name: str, value: str) -> bool:
    return bool(_NAME.fullmatch(name)) and len(value) >= MIN_SECRET_CHARS


def _forms(values: Mapping[str, str]) -> dict[bytes, str]:
    """Each value as it may stand in a JSON body: raw, JSON-escaped (UTF-8 or ASCII)."""
    forms: dict[bytes, str] = {}
    for name, value in values.items():
        for form in (value, _json_escaped(value, False), _json_escaped(value, True)):
            forms.setdefault(form.encode(), name)
    return dict(sorted(forms.items(), key=lambda item: -len(item[0])))  # longest first


# -- restoring --------------------------------------------------------------------------


def restore(text: str, hidden: Mapping[str, str], *, escape: bool = False) -> str:
    """``text`` with the placeholders of ``hidden`` names back (JSON-escaped values
    with ``escape``: ``text`` is the inside of a JSON document)."""

    def one(match: re.Match[str]) -> str:
        value = hidden.get(match.group(1))
        if value is None:
            return match.group()
        return _json_escaped(value, False) if escape else value

    return PLACEHOLDER.sub(one, text) if "[SECRET:" in text else text


@dataclass
class ArgStream:
    """One tool call's arguments as they stream: :meth:`feed` each piece (returns what
    may go out now), :meth:`flush` at the call's end (the tail held back)."""

    hidden: Mapping[str, str]
    escape: bool = True
    _held: str = ""

    def feed(self, piece: str) -> str:
        text = self._held + piece
        last = _last_known(text, self.hidden)
        tail = text[last:]  # no whole placeholder to restore in it
        cut = _partial_at(tail, self.hidden)
        self._held = tail[cut:]
        return restore(text[:last], self.hidden, escape=self.escape) + tail[:cut]

    def flush(self) -> str:
        held, self._held = self._held, ""
        return held


def _last_known(text: str, hidden: Mapping[str, str]) -> int:
    """Where the last restorable placeholder in ``text`` ends."""
    ends = [m.end() for m in PLACEHOLDER.finditer(text) if m.group(1) in hidden]
    return ends[-1] if ends else 0


def _partial_at(text: str, hidden: Mapping[str, str]) -> int:
    """Where a tail of ``text`` that may grow into a placeholder starts (else its end)."""
    start = text.find("[", max(0, len(text) - 8 - max((len(n) for n in hidden), default=0)))
    while start >= 0:
        tail = text[start:]
        if any(placeholder(name).startswith(tail) for name in hidden):
            return start
        start = text.find("[", start + 1)
    return len(text)


# -- answers ----------------------------------------------------------------------------


@dataclass
class _Calls:
    """The tool calls of one answer whose arguments are streaming."""

    hidden: Mapping[str, str]
    streams: dict[Any, ArgStream] = field(default_factory=dict)

    def feed(self, key: Any, piece: str, escape: bool = True) -> str:
        stream = self.streams.setdefault(key, ArgStream(self.hidden, escape))
        return stream.feed(piece)

    def flush(self, key: Any) -> str:
        stream = self.streams.pop(key, None)
        return stream.flush() if stream is not None else ""


#: One event's data in, the events to send instead out (None: send it unchanged).
Rewrite = Callable[[dict[str, Any], _Calls], list[dict[str, Any]] | None]


def _anthropic(data: dict[str, Any], calls: _Calls) -> list[dict[str, Any]] | None:
    kind, index = data.get("type"), data.get("index")
    if kind == "content_block_start" and _dict(data.get("content_block")).get("type") in _TOOLS:
        calls.streams[index] = ArgStream(calls.hidden)
        block = data["content_block"]
        return _changed(data, block, "input", _restore_obj(block.get("input"), calls.hidden))
    delta = _dict(data.get("delta"))
    if kind == "content_block_delta" and delta.get("type") == "input_json_delta":
        piece = str(delta.get("partial_json") or "")
        return _changed(data, delta, "partial_json", calls.feed(index, piece))
    if kind == "content_block_stop" and index in calls.streams:
        rest = calls.flush(index)
        extra = {"type": "input_json_delta", "partial_json": rest}
        return (
            [{"type": "content_block_delta", "index": index, "delta": extra}, data]
            if rest
            else None
        )
    if kind == "message":  # a whole JSON answer
        return _blocks(data, calls.hidden)
    return None


_TOOLS = ("tool_use", "server_tool_use")


def _blocks(message: dict[str, Any], hidden: Mapping[str, str]) -> list[dict[str, Any]] | None:
    changed = False
    for block in message.get("content") or []:
        if isinstance(block, dict) and block.get("type") in _TOOLS:
            new = _restore_obj(block.get("input"), hidden)
            changed = changed or new != block.get("input")
            block["input"] = new
    return [message] if changed else None


def _openai(data: dict[str, Any], calls: _Calls) -> list[dict[str, Any]] | None:
    kind = str(data.get("type") or "")
    key = data.get("item_id", data.get("output_index"))
    for suffix, escape, whole in _OPENAI_STREAMS:
        if kind == f"response.{suffix}.delta":
            return _changed(
                data, data, "delta", calls.feed(key, str(data.get("delta") or ""), escape)
            )
        if kind == f"response.{suffix}.done":
            return _openai_done(data, calls, key, suffix, escape, whole)
    if kind in ("response.output_item.added", "response.output_item.done"):
        return [data] if _item(_dict(data.get("item")), calls.hidden) else None
    response = _dict(data.get("response")) if kind.startswith("response.") else data
    if response.get("object") == "response" or "output" in response:
        changed = [_item(_dict(i), calls.hidden) for i in response.get("output") or []]
        return [data] if any(changed) else None
    return None


def _openai_done(
    data: dict[str, Any], calls: _Calls, key: Any, suffix: str, escape: bool, whole: str
) -> list[dict[str, Any]] | None:
    """A call's arguments done: the tail held back as one more delta, then the whole."""
    rest = calls.flush(key)
    old = data.get(whole)
    if isinstance(old, str):
        data[whole] = restore(old, calls.hidden, escape=escape)
    if not rest and data.get(whole) == old:
        return None
    ids: dict[str, Any] = {k: data[k] for k in _IDS if k in data}
    more: dict[str, Any] = {"type": f"response.{suffix}.delta", **ids, "delta": rest}
    return [more, data] if rest else [data]


_IDS: tuple[str, ...] = ("item_id", "output_index", "sequence_number")
#: (event name's middle, arguments are JSON text, the done event's whole field)
_OPENAI_STREAMS = (
    ("function_call_arguments", True, "arguments"),
    ("custom_tool_call_input", False, "input"),
)


def _item(item: dict[str, Any], hidden: Mapping[str, str]) -> bool:
    """Restore one output item's call in place; True when it changed."""
    field_of = {"function_call": "arguments", "custom_tool_call": "input"}
    kind = str(item.get("type"))
    key = field_of.get(kind, "action" if kind == "local_shell_call" else "")
    old = item.get(key)
    if not key or old is None:
        return False
    if isinstance(old, str):
        item[key] = restore(old, hidden, escape=kind == "function_call")
    else:
        item[key] = _restore_obj(old, hidden)
    return bool(item[key] != old)


def _gemini(data: dict[str, Any], calls: _Calls) -> list[dict[str, Any]] | None:
    changed = False
    for candidate in data.get("candidates") or []:
        for part in _dict(_dict(candidate).get("content")).get("parts") or []:
            call = _dict(_dict(part).get("functionCall"))
            if "args" in call:
                new = _restore_obj(call["args"], calls.hidden)
                changed, call["args"] = changed or new != call["args"], new
    return [data] if changed else None


_REWRITE: dict[Api, Rewrite] = {"anthropic": _anthropic, "openai": _openai, "gemini": _gemini}


def _changed(
    data: dict[str, Any], holder: dict[str, Any], key: str, new: Any
) -> list[dict[str, Any]] | None:
    if holder.get(key) == new:
        return None
    holder[key] = new
    return [data]


def _restore_obj(value: Any, hidden: Mapping[str, str]) -> Any:
    if isinstance(value, str):
        return restore(value, hidden)
    if isinstance(value, list):
        return [_restore_obj(v, hidden) for v in value]
    if isinstance(value, dict):
        return {k: _restore_obj(v, hidden) for k, v in value.items()}
    return value


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


# -- the byte stream --------------------------------------------------------------------

_END = re.compile(rb"\r\n\r\n|\n\n|\r\r")


@dataclass
class Restorer:
    """One answer of ``api`` to a request that hid ``hidden``: :meth:`feed` its body's
    bytes as they come (what may go to the client now comes back), :meth:`close` at
    its end. An event stream is held back only to an event's end; a JSON answer whole."""

    api: Api
    hidden: Mapping[str, str]
    streaming: bool
    _buffer: bytes = b""
    _calls: _Calls | None = None

    def __post_init__(self) -> None:
        self._calls = _Calls(self.hidden)

    def feed(self, chunk: bytes) -> bytes:
        self._buffer += chunk
        if not self.streaming:
            return b""
        out: list[bytes] = []
        for block in self._complete():
            out.append(self._event(block))
        return b"".join(out)

    def close(self) -> bytes:
        rest, self._buffer = self._buffer, b""
        if not rest:
            return b""
        return self._event(rest) if self.streaming else self._whole(rest)

    def _complete(self) -> Iterator[bytes]:
        while (end := _END.search(self._buffer)) is not None:
            block, self._buffer = self._buffer[: end.end()], self._buffer[end.end() :]
            yield block

    def _event(self, block: bytes) -> bytes:
        """One raw event (its blank line included): as it came, or rewritten."""
        name, data = _parse(block)
        assert self._calls is not None
        if data is None:
            return block
        new = _REWRITE[self.api](data, self._calls)
        if new is None:
            return block
        ending = block[len(block.rstrip(b"\r\n")) :] or b"\n\n"
        return b"".join(_serialize(item, name is not None) + ending for item in new)

    def _whole(self, body: bytes) -> bytes:
        try:
            value = json.loads(body)
        except ValueError:
            return body
        assert self._calls is not None
        items = value if isinstance(value, list) else [value]
        changed = [_REWRITE[self.api](i, self._calls) for i in items if isinstance(i, dict)]
        if not any(c is not None for c in changed):
            return body
        return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def _parse(block: bytes) -> tuple[str | None, dict[str, Any] | None]:
    name: str | None = None
    data: list[str] = []
    for raw in block.decode("utf-8", "replace").replace("\r\n", "\n").split("\n"):
        key, _, value = raw.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if key == "event":
            name = value
        elif key == "data":
            data.append(value)
    try:
        parsed = json.loads("\n".join(data)) if data else None
    except ValueError:
        return name, None
    return name, parsed if isinstance(parsed, dict) else None


def _serialize(data: dict[str, Any], named: bool) -> bytes:
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    head = f"event: {data.get('type')}\n" if named else ""
    return f"{head}data: {text}".encode()
