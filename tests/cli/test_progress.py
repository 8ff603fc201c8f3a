"""The live status line: cleared before output, drawn after it, never inside a
streamed line; elapsed time, tokens, cost and the running tool."""

from __future__ import annotations

import io

from chorus.cli._progress import CLEAR, StatusLine
from chorus.cli._render import Segments


def test_the_line_is_cleared_before_output_and_drawn_after() -> None:
    stream = io.StringIO()
    now = [100.0]

    def write(segments: Segments, end: str) -> None:
        stream.write("".join(t for _, t in segments) + end)

    line = StatusLine(stream, write, clock=lambda: now[0])
    line.see({"type": "usage", "usage": {"input_tokens": 10, "output_tokens": 3}})
    line.see({"type": "tool_call", "tool": "shell"})
    now[0] = 104.0
    line.write([("", "tool shell ls")], "\n")
    assert stream.getvalue() == "tool shell ls\n… 4s · 10 in / 3 out tokens · running shell"
    line.write([("", "assistant Hel")], "")  # a streamed line opens: no status inside it
    assert stream.getvalue().endswith(CLEAR + "assistant Hel")
    line.see({"type": "tool_result"})
    line.see({"type": "turn_completed", "cost_usd": 0.0123})
    line.write([], "\n")
    assert stream.getvalue().endswith("assistant Hel\n… 4s · 10 in / 3 out tokens · $0.0123")
    line.stop()
    assert stream.getvalue().endswith(CLEAR)
