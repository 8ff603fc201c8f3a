"""A live status line under a job's events on a terminal: elapsed time, tokens,
cost and the running tool. It is cleared before any output and drawn again
after it, and redrawn every second by a small thread while the job is quiet."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from chorus.cli._render import Segments, Write

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, TextIO

CLEAR = "\r\x1b[2K"


class StatusLine:
    """Wraps a :class:`Write`: output goes through, the status line stays last."""

    def __init__(
        self, stream: TextIO, write: Write, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._stream = stream
        self._inner = write
        self._clock = clock
        self._started = clock()
        self._lock = threading.Lock()
        self._shown = False
        self._mid_line = False
        self._done = threading.Event()
        self.tokens_in = self.tokens_out = 0
        self.cost: float | None = None
        self.tool: str | None = None

    def write(self, segments: Segments, end: str) -> None:
        with self._lock:
            self._clear()
            self._inner(segments, end)
            self._mid_line = not end.endswith("\n")
            self._draw()

    def see(self, event: dict[str, Any]) -> None:
        """Take what the line shows from an event (before it is rendered)."""
        kind = event.get("type")
        if kind == "usage":
            self.tokens_in += int(event["usage"].get("input_tokens") or 0)
            self.tokens_out += int(event["usage"].get("output_tokens") or 0)
        elif kind == "turn_completed" and event.get("cost_usd") is not None:
            self.cost = float(event["cost_usd"])
        elif kind == "tool_call":
            self.tool = str(event.get("tool"))
        elif kind in ("tool_result", "turn_completed", "job_ended"):
            self.tool = None

    def text(self) -> str:
        parts = [f"{self._clock() - self._started:.0f}s"]
        if self.tokens_in or self.tokens_out:
            parts.append(f"{self.tokens_in} in / {self.tokens_out} out tokens")
        if self.cost is not None:
            parts.append(f"${self.cost:.4f}")
        if self.tool:
            parts.append(f"running {self.tool}")
        return "… " + " · ".join(parts)

    def start(self) -> None:
        threading.Thread(target=self._tick, name="chorus-status-line", daemon=True).start()

    def stop(self) -> None:
        self._done.set()
        with self._lock:
            self._clear()

    def _tick(self) -> None:
        while not self._done.wait(1.0):
            with self._lock:
                self._clear()
                self._draw()

    def _clear(self) -> None:
        if self._shown:
            self._stream.write(CLEAR)
            self._stream.flush()
            self._shown = False

    def _draw(self) -> None:
        if self._mid_line or self._done.is_set():
            return
        self._stream.write(self.text())
        self._stream.flush()
        self._shown = True
