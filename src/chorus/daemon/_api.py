"""The daemon's ASGI app: REST for jobs and sessions, SSE for event streams.

Errors are JSON ``{"error": message, "code": code}`` by the one table of
:mod:`chorus.web`: 400 for bad input (nothing is written), 404 for unknown ids.
Event streams are ``text/event-stream`` with one canonical event as JSON per
``data:`` line; a job's stream ends after its :class:`JobEnded` event. A followed
stream with nothing to say writes an SSE comment (``: ping``) every ``[daemon]
stream_ping_s`` seconds, so a client can read without a timeout and still tell a
quiet job from a lost daemon.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import asdict
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Route

from chorus._json_input import read_object
from chorus.daemon._cluster import nodes_status
from chorus.daemon._job_run import active_body
from chorus.daemon._requests import read_job_request
from chorus.daemon._supervisor import Supervisor
from chorus.daemon._talk_api import talk_routes
from chorus.daemon._worktree_api import worktree_routes
from chorus.events import JobEnded, event_to_json
from chorus.flags import board, live_status
from chorus.jobs import JobRequest
from chorus.store import (
    JobRecord,
    JobState,
    SessionRecord,
    StoreError,
    resolve_job_id,
    resolve_session_id,
)
from chorus.web import bad_request, guarded

Lifespan = Callable[[Starlette], contextlib.AbstractAsyncContextManager[None]]


def _job_json(job: JobRecord, sup: Supervisor) -> dict[str, Any]:
    """The job's record; ``body`` is the body credited (after a failover, the one it
    moved to) and ``failed_over_from`` the bodies it left, in order."""
    data = asdict(job)
    data["state"] = str(job.state)
    data["failed_over_from"] = sup.failed_over_from(job)
    return data


def _session_json(session: SessionRecord) -> dict[str, Any]:
    """The record, and ``active_body``: the body it runs on now (it moves on failover)."""
    return {**asdict(session), "active_body": active_body(session)}


async def _job(sup: Supervisor, request: Request) -> JobRecord:
    """The job named in the path, by id or unique prefix."""
    return await sup.store.get_job(await resolve_job_id(sup.store, request.path_params["job_id"]))


async def _jobs_and_nodes(sup: Supervisor) -> tuple[list[JobRecord], list[Any]]:
    """The jobs and nodes ``status`` shows; none while the shared database is away (said
    at once, not waited for), also in the moment before the store notices it is gone."""
    if sup.store.outage() is not None:
        return [], []
    try:
        jobs = await sup.store.list_jobs()
        return jobs, await nodes_status(sup.store, jobs)
    except StoreError:
        return [], []


def build_app(
    sup: Supervisor, lifespan: Lifespan | None = None, extra_routes: Sequence[BaseRoute] = ()
) -> Starlette:
    """The app around a running :class:`Supervisor`, plus ``extra_routes`` (the gateway's)."""

    async def status(request: Request) -> Response:
        jobs, nodes = await _jobs_and_nodes(sup)
        counts: dict[str, int] = {}
        for job in jobs:
            counts[str(job.state)] = counts.get(str(job.state), 0) + 1
        bodies = list(sup.config.router.bodies)
        return JSONResponse(
            {**sup.status(), "jobs": counts, "router_bodies": bodies, "nodes": nodes}
        )

    async def shutdown(request: Request) -> Response:
        asyncio.get_running_loop().call_later(0.1, os.kill, os.getpid(), signal.SIGTERM)
        return JSONResponse({"stopping": True})

    async def create_job(request: Request) -> Response:
        fields = await read_job_request(request, sup.config.daemon.max_prompt_bytes)
        try:
            req = JobRequest(**fields)
        except TypeError as exc:
            return bad_request(f"bad job request: {exc}")
        return JSONResponse(_job_json(await sup.submit(req), sup), status_code=201)

    async def list_jobs(request: Request) -> Response:
        state = request.query_params.get("state")
        try:
            wanted = JobState(state) if state else None
        except ValueError:
            return bad_request(f"unknown state {state!r}")
        jobs = await sup.store.list_jobs(state=wanted)
        pending = await board(sup.store)  # waiting / flagged
        rows = [{**_job_json(j, sup), "status": live_status(j, pending)} for j in jobs]
        return JSONResponse(rows)

    async def get_job(request: Request) -> Response:
        return JSONResponse(_job_json(await _job(sup, request), sup))

    async def interrupt(request: Request) -> Response:
        return JSONResponse({"result": await sup.interrupt((await _job(sup, request)).id)})

    async def steer(request: Request) -> Response:
        text = (await read_object(request, what="the steer request")).get("text")
        if not isinstance(text, str):
            return bad_request("bad steer request: 'text' must be a string")
        return JSONResponse(await sup.steer((await _job(sup, request)).id, text))

    async def job_events(request: Request) -> Response:
        job = await _job(sup, request)
        try:
            from_seq = int(request.query_params.get("from_seq", "1"))
        except ValueError:
            return bad_request("from_seq must be a whole number")
        follow = request.query_params.get("follow", "1") != "0"
        stream = _pinged(_job_stream(sup, job, from_seq, follow), sup.config.daemon.stream_ping_s)
        return StreamingResponse(stream, media_type="text/event-stream")

    async def list_sessions(request: Request) -> Response:
        sessions = await sup.store.list_sessions()
        return JSONResponse([_session_json(s) for s in sessions])

    async def get_session(request: Request) -> Response:
        sid = await resolve_session_id(sup.store, request.path_params["session_id"])
        session = await sup.store.get_session(sid)
        data = _session_json(session)
        data["busy"] = sup.is_busy(session.id)
        return JSONResponse(data)

    async def pause(request: Request) -> Response:
        sid = await resolve_session_id(sup.store, request.path_params["session_id"])
        # Pausing never fails: no new job of the session starts, and ``busy`` says
        # whether one is still running (the caller waits for it to drain).
        paused = request.path_params["action"] == "pause"
        if paused:
            await sup.pause(sid)
        else:
            sup.resume(sid)
        return JSONResponse({"session_id": sid, "paused": paused, "busy": sup.is_busy(sid)})

    return Starlette(
        lifespan=lifespan,
        routes=[
            Route("/status", status),
            Route("/shutdown", shutdown, methods=["POST"]),
            Route("/jobs", guarded(create_job), methods=["POST"]),
            Route("/jobs", list_jobs),
            Route("/jobs/{job_id}", guarded(get_job)),
            Route("/jobs/{job_id}/interrupt", guarded(interrupt), methods=["POST"]),
            Route("/jobs/{job_id}/steer", guarded(steer), methods=["POST"]),
            Route("/jobs/{job_id}/events", guarded(job_events)),
            Route("/sessions", list_sessions),
            Route("/sessions/{session_id}", guarded(get_session)),
            Route("/sessions/{session_id}/{action:str}", guarded(pause), methods=["POST"]),
            *worktree_routes(sup.store),
            *talk_routes(sup),
            *extra_routes,
        ],
    )


PING = ": ping\n\n"


async def _pinged(stream: AsyncIterator[str], every: float) -> AsyncIterator[str]:
    """``stream``, with a ``: ping`` comment after each ``every`` seconds of silence.

    The stream is pumped by its own task into a queue: timing out a read there
    never cancels the stream itself."""
    queue: asyncio.Queue[str | None] = asyncio.Queue(maxsize=64)

    async def pump() -> None:
        try:
            async for chunk in stream:
                await queue.put(chunk)
        finally:
            await queue.put(None)

    task = asyncio.create_task(pump(), name="sse-pump")
    try:
        while True:
            try:
                chunk = await asyncio.wait_for(queue.get(), every)
            except TimeoutError:
                yield PING
                continue
            if chunk is None:
                break
            yield chunk
        await task  # re-raise what ended the stream, if anything
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def _job_stream(
    sup: Supervisor, job: JobRecord, from_seq: int, follow: bool
) -> AsyncIterator[str]:
    """The job's events from ``from_seq``; with ``follow``, live until its JobEnded."""
    sid = job.session_id or ""
    if not follow:
        for event in await sup.store.read_events(sid, from_seq=from_seq):
            if event.job_id == job.id:
                yield f"data: {event_to_json(event)}\n\n"
        return
    sub = await sup.store.subscribe(sid, from_seq=from_seq)
    async with sub:
        async for event in sub:
            if event.job_id != job.id:
                continue
            yield f"data: {event_to_json(event)}\n\n"
            if isinstance(event, JobEnded):
                return
