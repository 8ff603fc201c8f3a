"""Server-sent events, split incrementally: bytes in (any chunking), events out.

Linear in the stream's length whatever its chunking: the bytes not yet part of a
whole event wait as they came, and only a chunk that ends an event (looked for in
that chunk, and across its start) has them joined and split at once, in C (a long
stream of small deltas: one split a read; one big event in small chunks: one
search of each chunk, one join at its end). A splitter given a ``skip`` pattern
returns only the events whose block does not start with it, found by one search
in C of the bytes joined: a stream of thousands of deltas costs no Python a delta.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

#: A single event larger than this is dropped (no API's usage event is near it).
MAX_EVENT_BYTES = 16 << 20


@dataclass(frozen=True, slots=True)
class SseEvent:
    event: str | None
    data: str


@dataclass(slots=True)
class SseSplitter:
    """Feed it the bytes of a ``text/event-stream`` as they come; it returns the events
    completed so far (``\\n`` or ``\\r\\n`` line ends, comments skipped).

    ``skip``: a pattern (of bytes, ``\\n`` line ends) matched at the start of each
    event's block: :meth:`blocks` leaves out the blocks it matches (a reader's events
    it never reads, named in their first line: :func:`skipping`)."""

    skip: re.Pattern[bytes] | None = None
    #: The starts of the blocks kept: each ``\\n\\n`` not followed by ``skip``.
    _kept: re.Pattern[bytes] | None = None
    #: The bytes of the event under way, as they came (``\\n`` line ends).
    _pending: list[bytes] = field(default_factory=list)
    _size: int = 0
    #: A ``\\r`` that ended the last chunk (its ``\\n`` may open the next one).
    _cr: bytes = b""
    _skipping: bool = False

    def __post_init__(self) -> None:
        if self.skip is not None:
            self._kept = re.compile(b"\n\n(?!" + self.skip.pattern + b")")

    def feed(self, chunk: bytes) -> list[SseEvent]:
        return [event for block in self.blocks(chunk) if (event := parse_event(block))]

    def blocks(self, chunk: bytes) -> list[bytes]:
        """As :meth:`feed`, the events' raw blocks (``\\n`` line ends, no blank line):
        a reader that wants few of them looks at their :func:`event_name` first."""
        data = self._cr + chunk
        self._cr = b"\r" if data.endswith(b"\r") else b""
        data = data[:-1] if self._cr else data
        if b"\r" in data:  # one byte looked for (memchr) before two are
            data = data.replace(b"\r\n", b"\n")
        if not data:
            return []
        ends = b"\n\n" in data or (
            data.startswith(b"\n") and bool(self._pending) and self._pending[-1].endswith(b"\n")
        )
        self._pending.append(data)
        self._size += len(data)
        blocks = self._split() if ends else []
        if self._size > MAX_EVENT_BYTES:
            self._pending, self._size, self._skipping = [], 0, True
        return blocks

    def _split(self) -> list[bytes]:
        data = b"".join(self._pending)
        end = data.rfind(b"\n\n")
        tail = data[end + 2 :]
        self._pending, self._size = ([tail] if tail else []), len(tail)
        first = not self._skipping  # (else the end of an event too large to keep)
        self._skipping = False
        if self.skip is None or self._kept is None:
            parts = data[:end].split(b"\n\n")
            return [part for part in (parts if first else parts[1:]) if part]
        return _wanted(data, end, self.skip if first else None, self._kept)

    def close(self) -> list[SseEvent]:
        """The last event when the stream ended without its blank line."""
        block = (b"".join(self._pending) + self._cr).rstrip(b"\r\n")
        self._pending, self._size, self._cr = [], 0, b""
        event = None if self._skipping or not block else parse_event(block)
        return [event] if event is not None else []


def _wanted(
    data: bytes, end: int, skip: re.Pattern[bytes] | None, kept: re.Pattern[bytes]
) -> list[bytes]:
    """The blocks of ``data[:end]`` that ``kept`` finds the start of; the first one when
    ``skip`` does not match it (None: never, it is the end of an event dropped)."""
    starts = [0] if skip is not None and not skip.match(data, 0, end) else []
    starts += [found.end() for found in kept.finditer(data, 0, end)]
    blocks = [data[start : _block_end(data, start, end)] for start in starts]
    return [block for block in blocks if block]


def _block_end(data: bytes, start: int, end: int) -> int:
    found = data.find(b"\n\n", start, end)
    return end if found < 0 else found


def skipping(names: str) -> re.Pattern[bytes]:
    """A ``skip`` pattern: a block whose first line names an event ``names`` (a
    pattern of the whole name) matches."""
    return re.compile(b"event: ?(?:" + names.encode() + b")\n")


def event_name(block: bytes) -> str | None:
    """A raw event's name without reading its data (None: it has none)."""
    if block.startswith(b"event:"):
        line = block.split(b"\n", 1)[0][6:]
        return (line[1:] if line.startswith(b" ") else line).decode("utf-8", "replace")
    if b"\nevent:" not in block:
        return None
    event = parse_event(block)
    return event.event if event is not None else None


def parse_event(block: bytes) -> SseEvent | None:
    """One raw event (``\\n`` line ends), None when it has no data."""
    name: str | None = None
    data: list[str] = []
    for raw in block.decode("utf-8", "replace").split("\n"):
        key, _, value = raw.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if key == "event":
            name = value
        elif key == "data":
            data.append(value)
    return SseEvent(name, "\n".join(data)) if data else None
