"""The usage each model API reports, read from a response's bytes (sans-I/O).

:class:`UsageReader` is fed a response body as it streams (SSE or JSON, compressed
or not) and keeps the API's own usage fields:

- Anthropic Messages: ``message_start``, then ``message_delta`` (cumulative), or a
  JSON ``message``: ``input_tokens``, ``cache_read_input_tokens``,
  ``cache_creation_input_tokens``, ``output_tokens``.
- OpenAI Responses: ``response.completed`` (``incomplete``, ``failed``) or a JSON
  ``response``: ``input_tokens`` (``input_tokens_details.cached_tokens``),
  ``output_tokens`` (``output_tokens_details.reasoning_tokens``).
- Gemini: ``usageMetadata`` on each chunk (cumulative: the last counts):
  ``promptTokenCount``, ``toolUsePromptTokenCount``, ``cachedContentTokenCount``,
  ``candidatesTokenCount``, ``thoughtsTokenCount``.

Normalized into :class:`chorus.events.Usage` the same way for every API: input counts
every input token (cached and cache-written ones too, which Anthropic reports apart),
output counts every output token (reasoning included, which Gemini reports apart).
"""

from __future__ import annotations

import json
import re
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from chorus.events import Usage
from chorus.meter._sse import SseSplitter, event_name, parse_event, skipping

Api = Literal["anthropic", "openai", "gemini"]
APIS: tuple[Api, ...] = ("anthropic", "openai", "gemini")
#: A JSON body is read up to this size (an answer bigger than this has no usage read).
MAX_JSON_BYTES = 32 << 20


@dataclass(slots=True)
class Tally:
    """The raw counts an API stated so far, and whether its last usage was seen."""

    model: str | None = None
    input: int = 0
    cached: int = 0
    cache_write: int = 0
    output: int = 0
    reasoning: int = 0
    seen: bool = False
    done: bool = False

    def usage(self) -> Usage:
        return Usage.model_construct(  # counts made ints by _int: not validated again
            input_tokens=self.input,
            output_tokens=self.output,
            cached_input_tokens=self.cached,
            cache_write_input_tokens=self.cache_write,
            reasoning_tokens=self.reasoning,
        )

    def usage_fields(self) -> dict[str, int]:
        """The counts as :class:`chorus.events.Usage`'s fields (no model made)."""
        return {
            "input_tokens": self.input,
            "output_tokens": self.output,
            "cached_input_tokens": self.cached,
            "cache_write_input_tokens": self.cache_write,
            "reasoning_tokens": self.reasoning,
        }

    # the names of Usage's fields, for the price table (``_prices.Counts``)

    @property
    def input_tokens(self) -> int:
        return self.input

    @property
    def output_tokens(self) -> int:
        return self.output

    @property
    def cached_input_tokens(self) -> int:
        return self.cached

    @property
    def cache_write_input_tokens(self) -> int:
        return self.cache_write


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


# -- Anthropic ---------------------------------------------------------------------------


def _anthropic(tally: Tally, data: dict[str, Any]) -> None:
    kind = data.get("type")
    if kind == "message_start":
        _anthropic_message(tally, _dict(data.get("message")))
    elif kind == "message_delta":
        _anthropic_usage(tally, _dict(data.get("usage")))
    elif kind == "message_stop":
        tally.done = True
    elif kind == "message":  # a whole JSON answer
        _anthropic_message(tally, data)
        tally.done = True


def _anthropic_message(tally: Tally, message: dict[str, Any]) -> None:
    if isinstance(message.get("model"), str):
        tally.model = message["model"]
    _anthropic_usage(tally, _dict(message.get("usage")))


def _anthropic_usage(tally: Tally, usage: dict[str, Any]) -> None:
    """Fields present replace what was stated (Anthropic's counts are cumulative)."""
    if not usage:
        return
    tally.seen = True
    parts = {
        "input_tokens": "input",
        "cache_read_input_tokens": "cached",
        "cache_creation_input_tokens": "cache_write",
        "output_tokens": "output",
    }
    raw = {attr: _int(usage[key]) for key, attr in parts.items() if key in usage}
    uncached = raw.pop("input", tally.input - tally.cached - tally.cache_write)
    for attr, value in raw.items():
        setattr(tally, attr, value)
    tally.input = uncached + tally.cached + tally.cache_write


# -- OpenAI Responses --------------------------------------------------------------------

_OPENAI_ENDS = ("response.completed", "response.incomplete", "response.failed")


def _openai(tally: Tally, data: dict[str, Any]) -> None:
    kind = data.get("type")
    if isinstance(kind, str) and kind.startswith("response."):
        response = _dict(data.get("response"))
        if isinstance(response.get("model"), str):
            tally.model = response["model"]
        if kind in _OPENAI_ENDS:
            _openai_usage(tally, response)
    elif data.get("object") == "response":  # a whole JSON answer
        tally.model = data["model"] if isinstance(data.get("model"), str) else tally.model
        _openai_usage(tally, data)


def _openai_usage(tally: Tally, response: dict[str, Any]) -> None:
    tally.done = True
    usage = _dict(response.get("usage"))
    if not usage:
        return
    tally.seen = True
    tally.input = _int(usage.get("input_tokens"))
    tally.cached = _int(_dict(usage.get("input_tokens_details")).get("cached_tokens"))
    tally.output = _int(usage.get("output_tokens"))
    tally.reasoning = _int(_dict(usage.get("output_tokens_details")).get("reasoning_tokens"))


# -- Gemini ------------------------------------------------------------------------------


def _gemini(tally: Tally, data: dict[str, Any]) -> None:
    if isinstance(data.get("modelVersion"), str):
        tally.model = data["modelVersion"]
    usage = _dict(data.get("usageMetadata"))
    if usage:
        tally.seen = True
        tally.input = _int(usage.get("promptTokenCount")) + _int(
            usage.get("toolUsePromptTokenCount")
        )
        tally.cached = _int(usage.get("cachedContentTokenCount"))
        tally.reasoning = _int(usage.get("thoughtsTokenCount"))
        tally.output = _int(usage.get("candidatesTokenCount")) + tally.reasoning
    finished = any(_dict(c).get("finishReason") for c in data.get("candidates") or [])
    tally.done = tally.done or (finished and bool(usage))


_READ: dict[Api, Callable[[Tally, dict[str, Any]], None]] = {
    "anthropic": _anthropic,
    "openai": _openai,
    "gemini": _gemini,
}


# -- the reader --------------------------------------------------------------------------


class _Decoder:
    """Undo a response's ``content-encoding`` (gzip, deflate) for reading; any other
    encoding cannot be read (``ok`` false)."""

    def __init__(self, encoding: str) -> None:
        encoding = encoding.strip().lower()
        self.ok = encoding in ("", "identity", "gzip", "x-gzip", "deflate")
        zipped = encoding not in ("", "identity")
        self._inflate = zlib.decompressobj(47) if zipped and self.ok else None

    def feed(self, chunk: bytes) -> bytes:
        if self._inflate is None:
            return chunk
        try:
            return self._inflate.decompress(chunk)
        except zlib.error:
            self.ok, self._inflate = False, None
            return b""


@dataclass(slots=True)
class UsageReader:
    """Reads one response of ``api``: :meth:`feed` each chunk of its body as received
    (True once the API's last usage has been seen), :meth:`close` at its end."""

    api: Api
    content_type: str = ""
    encoding: str = ""
    tally: Tally = field(default_factory=Tally)
    _sse: SseSplitter | None = None
    _json: bytearray = field(default_factory=bytearray)
    _decoder: _Decoder | None = None

    def __post_init__(self) -> None:
        self._decoder = _Decoder(self.encoding)
        if "event-stream" in self.content_type.lower():
            self._sse = SseSplitter(_SKIP[self.api])

    @property
    def streaming(self) -> bool:
        """An event stream (else a JSON body, read whole at its end)."""
        return self._sse is not None

    def feed(self, chunk: bytes) -> bool:
        """Read ``chunk``; True when this chunk completed the usage."""
        assert self._decoder is not None
        if self.tally.done or not self._decoder.ok:
            return False
        data = self._decoder.feed(chunk)
        if self._sse is None:
            if len(self._json) + len(data) <= MAX_JSON_BYTES:
                self._json += data
            return False
        for block in self._sse.blocks(data):
            if not _no_usage(self.api, event_name(block)):
                event = parse_event(block)
                if event is not None:
                    self._event(event.data)
        return self.tally.done

    def close(self) -> Tally:
        """The counts read, once the body ended (or was cut)."""
        if self._sse is not None:
            for event in self._sse.close():
                self._event(event.data)
        elif self._json and not self.tally.done:
            for item in _json_items(bytes(self._json)):
                _READ[self.api](self.tally, item)
        return self.tally

    def error_body(self) -> dict[str, Any] | None:
        """A JSON body's object (an error's, for its quota details), else None."""
        items = _json_items(bytes(self._json)) if self._sse is None else []
        return items[0] if items else None

    def _event(self, data: str) -> None:
        try:
            value = json.loads(data)
        except ValueError:
            return
        if isinstance(value, dict):
            _READ[self.api](self.tally, value)


#: Events that never carry a model or usage: the content blocks and the text and
#: arguments streamed piece by piece, most of a stream's events, which are then not
#: parsed at all.
_ANTHROPIC_BULK = frozenset(
    {"content_block_start", "content_block_delta", "content_block_stop", "ping"}
)


#: The same events by their first line, passed over in C (:class:`SseSplitter`'s
#: ``skip``: a block it matches is one :func:`_no_usage` says so of; any other block
#: is looked at by name, then parsed).
_SKIP: dict[Api, re.Pattern[bytes] | None] = {
    "anthropic": skipping("|".join(sorted(_ANTHROPIC_BULK))),
    "openai": skipping(r"[^.\n]*\.[^.\n]*\.[^\n]*"),  # two dots or more
    "gemini": None,  # no names: every chunk may be its last
}


def _no_usage(api: Api, name: str | None) -> bool:
    if name is None:
        return False
    if api == "openai":  # an item's or a part's events (response.output_item.added...):
        return name.count(".") > 1  # the model and usage are in response.<state> ones
    return api == "anthropic" and name in _ANTHROPIC_BULK


def _json_items(raw: bytes) -> list[dict[str, Any]]:
    """The objects of a JSON body: one object, or Gemini's array of chunks."""
    try:
        value = json.loads(raw)
    except ValueError:
        return []
    items = value if isinstance(value, list) else [value]
    return [item for item in items if isinstance(item, dict)]


def read_usage(api: Api, body: bytes, content_type: str, encoding: str = "") -> Tally:
    """The counts of a whole response body (tests, recorded traffic)."""
    reader = UsageReader(api, content_type, encoding)
    reader.feed(body)
    return reader.close()
