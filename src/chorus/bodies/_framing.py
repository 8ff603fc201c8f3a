"""Sans-I/O NDJSON framing: split on ``\\n`` only, with a maximum line size.

Never ``splitlines()``: Node leaves U+2028 raw inside JSON strings, and
``splitlines`` would cut a message in two there.
"""

from __future__ import annotations

#: Default cap on one line from a body (8 MiB: tool outputs can be large).
MAX_LINE_BYTES = 8 << 20


class LineFramer:
    """Feed bytes, get complete lines (decoded UTF-8, without the newline).

    The partial tail is kept across :meth:`feed` calls. A line longer than
    ``max_bytes`` is dropped whole (its bytes are discarded up to its newline, so
    memory stays bounded even when it never ends) and counted in ``dropped``;
    the lines around it are delivered normally.
    """

    def __init__(self, max_bytes: int = MAX_LINE_BYTES) -> None:
        self.max_bytes = max_bytes
        self.dropped = 0
        self._buf = bytearray()
        self._skipping = False

    def feed(self, data: bytes) -> list[str]:
        lines: list[str] = []
        self._buf += data
        while (idx := self._buf.find(b"\n")) >= 0:
            raw = bytes(self._buf[:idx])
            del self._buf[: idx + 1]
            if self._skipping:
                self._skipping = False
            elif len(raw) > self.max_bytes:
                self.dropped += 1
            else:
                lines.append(raw.decode("utf-8", errors="replace").rstrip("\r"))
        if len(self._buf) > self.max_bytes:
            # An unterminated line already over the cap: count it once, then skip
            # the rest of it as it arrives.
            self._buf.clear()
            if not self._skipping:
                self.dropped += 1
            self._skipping = True
        return lines

    def flush(self) -> str | None:
        """Return the unterminated last line at end of stream, if any."""
        if not self._buf or self._skipping:
            return None
        raw = bytes(self._buf)
        self._buf.clear()
        return raw.decode("utf-8", errors="replace").rstrip("\r")
