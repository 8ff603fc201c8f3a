"""One server-sent stream per page for what is not a job's log: the job list, the
board of flags and approvals, a job's live state, the teams. The server looks
every ``every_s`` and sends a topic (``event: <topic>``, its JSON) only when it
changed, so a browser never polls and one connection carries the whole page.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

#: What a topic's snapshot is made by.
Snapshot = Callable[[], Awaitable[Any]]

PING = ": ping\n\n"


def live_frame(topic: str, data: Any) -> str:
    return f"event: {topic}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n"


async def live_sse(
    topics: dict[str, Snapshot], *, every_s: float = 0.5, ping_s: float = 15.0
) -> AsyncIterator[str]:
    """Each topic once at the start, then again whenever its snapshot changes."""
    yield "retry: 1000\n\n"
    last: dict[str, str] = {}
    quiet_since = time.monotonic()
    while True:
        for topic, snap in topics.items():
            chunk = live_frame(topic, await snap())
            if last.get(topic) != chunk:
                last[topic] = chunk
                quiet_since = time.monotonic()
                yield chunk
        if time.monotonic() - quiet_since > ping_s:
            quiet_since = time.monotonic()
            yield PING
        await asyncio.sleep(every_s)
