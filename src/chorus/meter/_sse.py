"""Server-sent events, split incrementally: bytes in (any chunking), events out."""

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

    _buffer: bytes = b""
    _skipping: bool = field(default=False)

    def feed(self, chunk: bytes) -> list[SseEvent]:
        self._buffer = (self._buffer + chunk).replace(b"\r\n", b"\n")
        events: list[SseEvent] = []
        while (end := self._buffer.find(b"\n\n")) >= 0:
            block, self._buffer = self._buffer[:end], self._buffer[end + 2 :]
            if self._skipping:
                self._skipping = False
            elif (event := _event(block)) is not None:
                events.append(event)
        if len(self._buffer) > MAX_EVENT_BYTES:
            self._buffer, self._skipping = b"", True
        return events

    def close(self) -> list[SseEvent]:
        """The last event when the stream ended without its blank line."""
        block, self._buffer = self._buffer.rstrip(b"\n"), b""
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
