"""Sans-I/O NDJSON framing: split on ``\\n`` only, with a maximum line size.

Never ``splitlines()``: Node leaves U+2028 raw inside JSON strings, and
``splitlines`` would cut a message in two there.
"""

from __future__ import annotations

from chorus._errors import LineTooLongError

#: Default cap on one line from a body (8 MiB: tool outputs can be large).
MAX_LINE_BYTES = 8 << 20


class LineFramer:
    """Feed bytes, get complete lines (decoded UTF-8, without the newline).

    The partial tail is kept across :meth:`feed` calls. A line (or a partial
    line) above ``max_bytes`` raises :class:`LineTooLongError`; the framer then
    drops that line's bytes up to its next newline so the stream can go on.
    """

    def __init__(self, max_bytes: int = MAX_LINE_BYTES) -> None:
        self.max_bytes = max_bytes
        self._buf = bytearray()
        self._skipping = False

    def feed(self, data: bytes) -> list[str]:
        lines: list[str] = []
        self._buf += data
        while True:
            idx = self._buf.find(b"\n")
            if idx < 0:
                break
            raw = bytes(self._buf[:idx])
            del self._buf[: idx + 1]
            if self._skipping:
                self._skipping = False
                continue
            if len(raw) > self.max_bytes:
                raise LineTooLongError(self.max_bytes)
            lines.append(raw.decode("utf-8", errors="replace").rstrip("\r"))
        if len(self._buf) > self.max_bytes:
            self._buf.clear()
            self._skipping = True
            raise LineTooLongError(self.max_bytes)
        return lines

    def flush(self) -> str | None:
        """Return the unterminated last line at end of stream, if any."""
        if not self._buf or self._skipping:
            return None
        raw = bytes(self._buf)
        self._buf.clear()
        return raw.decode("utf-8", errors="replace").rstrip("\r")
