"""Server-sent events, split incrementally: bytes in (any chunking), events out.

Linear in the stream's length whatever its chunking: the bytes not yet part of a
whole event stay in one buffer, searched for an event's end only where new bytes
came (a long stream of small deltas, or one big event in small chunks)."""

from __future__ import annotations

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
    completed so far (``\\n`` or ``\\r\\n`` line ends, comments skipped)."""

    _buffer: bytearray = field(default_factory=bytearray)
    #: Where in the buffer an event's end may start (before it: none).
    _scanned: int = 0
    #: A ``\\r`` that ended the last chunk (its ``\\n`` may open the next one).
    _cr: bytes = b""
    _skipping: bool = False

    def feed(self, chunk: bytes) -> list[SseEvent]:
        data = self._cr + chunk
        self._cr = b"\r" if data.endswith(b"\r") else b""
        self._buffer += (data[:-1] if self._cr else data).replace(b"\r\n", b"\n")
        events = self._split()
        if len(self._buffer) > MAX_EVENT_BYTES:
            self._buffer, self._scanned, self._skipping = bytearray(), 0, True
        return events

    def _split(self) -> list[SseEvent]:
        buffer, events, start = self._buffer, [], 0
        while (end := buffer.find(b"\n\n", max(start, self._scanned))) >= 0:
            if self._skipping:
                self._skipping = False
            elif (event := _event(bytes(buffer[start:end]))) is not None:
                events.append(event)
            start, self._scanned = end + 2, 0
        del buffer[:start]
        self._scanned = max(0, len(buffer) - 1)
        return events

    def close(self) -> list[SseEvent]:
        """The last event when the stream ended without its blank line."""
        block = bytes(self._buffer + self._cr).rstrip(b"\r\n")
        self._buffer, self._scanned, self._cr = bytearray(), 0, b""
        event = None if self._skipping or not block else _event(block)
        return [event] if event is not None else []


def _event(block: bytes) -> SseEvent | None:
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
