"""The daemon's ASGI app: REST for jobs and sessions, SSE for event streams.

Errors are JSON ``{"error": message, "code": code}``: 400 for bad input (nothing
is written), 404 for unknown ids. Event streams are ``text/event-stream`` with
one canonical event as JSON per ``data:`` line; a job's stream ends after its
:class:`JobEnded` event. A followed stream with nothing to say writes an SSE comment
(``: ping``) every ``[daemon] stream_ping_s`` seconds, so a client can read without a
timeout and still tell a quiet job from a lost daemon.
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

from chorus._errors import ChorusError, UserError
from chorus._json_input import BadJsonError, read_object
from chorus.daemon._cluster import nodes_status
from chorus.daemon._requests import BadJobRequestError, read_job_request
from chorus.daemon._supervisor import JobRequest, Supervisor
from chorus.daemon._worktree_api import worktree_routes
from chorus.events import JobEnded, event_to_json
from chorus.flags import board, live_status
from chorus.store import (
    JobRecord,
    JobState,
    SessionRecord,
    StoreError,
    UnknownRecordError,
    resolve_job_id,
    resolve_session_id,
)

Lifespan = Callable[[Starlette], contextlib.AbstractAsyncContextManager[None]]


def _job_json(job: JobRecord, sup: Supervisor) -> dict[str, Any]:
    """The job's record; ``body`` is the body credited (after a failover, the one it
    moved to) and ``failed_over_from`` the bodies it left, in order."""
    data = asdict(job)
    data["state"] = str(job.state)
    data["failed_over_from"] = sup.failed_over_from(job)
    return data


def _session_json(session: SessionRecord) -> dict[str, Any]:
    return asdict(session)


def _error(message: str, code: str, status: int) -> JSONResponse:
    return JSONResponse({"error": message, "code": code}, status_code=status)


def _fail(exc: Exception) -> JSONResponse:
    """Map Chorus errors to HTTP: user errors 400, unknown records 404, others 500."""
    name = type(exc).__name__
    if isinstance(exc, UnknownRecordError):
        return _error(str(exc), name, 404)
    if isinstance(exc, UserError):
        return _error(str(exc), name, 400)
    return _error(str(exc), name, 500)


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
        try:
            fields = await read_job_request(request, sup.config.daemon.max_prompt_bytes)
            req = JobRequest(**fields)
        except BadJobRequestError as exc:
            return _error(str(exc), exc.code, 400)
        except TypeError as exc:
            return _error(f"bad job request: {exc}", "bad_request", 400)
        try:
            job = await sup.submit(req)
        except (ChorusError, StoreError) as exc:
            return _fail(exc)
        return JSONResponse(_job_json(job, sup), status_code=201)

    async def list_jobs(request: Request) -> Response:
        state = request.query_params.get("state")
        try:
            wanted = JobState(state) if state else None
        except ValueError:
            return _error(f"unknown state {state!r}", "bad_request", 400)
        jobs = await sup.store.list_jobs(state=wanted)
        pending = await board(sup.store)  # waiting / flagged
        rows = [{**_job_json(j, sup), "status": live_status(j, pending)} for j in jobs]
        return JSONResponse(rows)

    async def get_job(request: Request) -> Response:
        try:
            job = await _job(sup, request)
        except (ChorusError, StoreError) as exc:
            return _fail(exc)
        return JSONResponse(_job_json(job, sup))

    async def interrupt(request: Request) -> Response:
        try:
            what = await sup.interrupt((await _job(sup, request)).id)
        except (ChorusError, StoreError) as exc:
            return _fail(exc)
        return JSONResponse({"result": what})

    async def steer(request: Request) -> Response:
        try:
            text = (await read_object(request, what="the steer request")).get("text")
        except BadJsonError as exc:
            return _error(str(exc), exc.code, 400)
        if not isinstance(text, str):
            return _error("bad steer request: 'text' must be a string", "bad_request", 400)
        try:
            return JSONResponse(await sup.steer((await _job(sup, request)).id, text))
        except (ChorusError, StoreError) as exc:
            return _fail(exc)

    async def job_events(request: Request) -> Response:
        try:
            job = await _job(sup, request)
        except (ChorusError, StoreError) as exc:
            return _fail(exc)
        try:
            from_seq = int(request.query_params.get("from_seq", "1"))
        except ValueError:
            return _error("from_seq must be a whole number", "bad_request", 400)
        follow = request.query_params.get("follow", "1") != "0"
        stream = _pinged(_job_stream(sup, job, from_seq, follow), sup.config.daemon.stream_ping_s)
        return StreamingResponse(stream, media_type="text/event-stream")

    async def list_sessions(request: Request) -> Response:
        sessions = await sup.store.list_sessions()
        return JSONResponse([_session_json(s) for s in sessions])

    async def get_session(request: Request) -> Response:
        try:
            sid = await resolve_session_id(sup.store, request.path_params["session_id"])
            session = await sup.store.get_session(sid)
        except (ChorusError, StoreError) as exc:
            return _fail(exc)
        data = _session_json(session)
        data["busy"] = sup.is_busy(session.id)
        return JSONResponse(data)

    async def pause(request: Request) -> Response:
        try:
            sid = await resolve_session_id(sup.store, request.path_params["session_id"])
        except (ChorusError, StoreError) as exc:
            return _fail(exc)
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
            Route("/jobs", create_job, methods=["POST"]),
            Route("/jobs", list_jobs),
            Route("/jobs/{job_id}", get_job),
            Route("/jobs/{job_id}/interrupt", interrupt, methods=["POST"]),
            Route("/jobs/{job_id}/steer", steer, methods=["POST"]),
            Route("/jobs/{job_id}/events", job_events),
            Route("/sessions", list_sessions),
            Route("/sessions/{session_id}", get_session),
            Route("/sessions/{session_id}/{action:str}", pause, methods=["POST"]),
            *worktree_routes(sup.store, _fail),
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
