"""A job's events as server-sent events whose ``id`` is the event's ``seq`` in its
session's log. A browser that reconnects sends ``Last-Event-ID`` and the stream
resumes from the next ``seq``, read from the log: no gap, no duplicate.

The stream says ``retry: 500`` (reconnect after half a second), writes a
``: ping`` comment after ``ping_s`` of silence, ends with an ``end`` event after
the job's :class:`JobEnded`, and, with ``rotate_s``, ends itself after that many
seconds (the browser reconnects and resumes, as after any dropped connection).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator

from chorus.dashboard._render import markdown_html
from chorus.events import Event, JobEnded, Text, event_to_json
from chorus.store import JOB_TERMINAL, JobRecord, Store

RETRY_MS = 500
PING = ": ping\n\n"


def resume_seq(last_event_id: str | None, from_seq: str | None) -> int:
    """The first seq to send: after ``Last-Event-ID``, else ``from_seq``, else 1."""
    for raw, step in ((last_event_id, 1), (from_seq, 0)):
        if raw and raw.strip().isdigit():
            return max(1, int(raw) + step)
    return 1


def event_data(event: Event) -> str:
    """The event's JSON; a complete answer also carries its markdown rendered as
    safe HTML (``html``), which the page shows in place of the raw text."""
    if not isinstance(event, Text):
        return event_to_json(event)
    data = json.loads(event_to_json(event))
    data["html"] = markdown_html(event.text)
    return json.dumps(data, separators=(",", ":"))


def frame(event: Event) -> str:
    return f"id: {event.seq}\ndata: {event_data(event)}\n\n"


async def job_sse(
    store: Store, job: JobRecord, first: int, *, ping_s: float, rotate_s: float | None
) -> AsyncIterator[str]:
    """The SSE body for ``job`` from seq ``first``."""
    yield f"retry: {RETRY_MS}\n\n"
    session_id = await _session_of(store, job)
    queue: asyncio.Queue[Event | None] = asyncio.Queue(maxsize=256)
    pump = asyncio.create_task(_pump(store, session_id, job.id, first, queue))
    stop_at = time.monotonic() + rotate_s if rotate_s else None
    try:
        async for chunk in _frames(queue, ping_s, stop_at):
            yield chunk
    finally:
        pump.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await pump


async def _frames(
    queue: asyncio.Queue[Event | None], ping_s: float, stop_at: float | None
) -> AsyncIterator[str]:
    while True:
        wait = ping_s if stop_at is None else min(ping_s, stop_at - time.monotonic())
        if wait <= 0:
            return  # rotate: the browser reconnects with Last-Event-ID
        try:
            event = await asyncio.wait_for(queue.get(), wait)
        except TimeoutError:
            yield PING
            continue
        if event is None:
            yield "event: end\ndata: {}\n\n"
            return
        yield frame(event)


async def _pump(
    store: Store, session_id: str, job_id: str, first: int, queue: asyncio.Queue[Event | None]
) -> None:
    if (await store.get_job(job_id)).state in JOB_TERMINAL:
        for event in await store.read_events(session_id, from_seq=first):
            if event.job_id == job_id:
                await queue.put(event)
        await queue.put(None)
        return
    sub = await store.subscribe(session_id, from_seq=first)
    async with sub:
        async for event in sub:
            if event.job_id != job_id:
                continue
            await queue.put(event)
            if isinstance(event, JobEnded):
                break
    await queue.put(None)


async def _session_of(store: Store, job: JobRecord) -> str:
    """The job's session; a queued job gets one when it is claimed."""
    while not job.session_id:
        await asyncio.sleep(0.2)
        job = await store.get_job(job.id)
    return job.session_id
