"""The daemon's ``/teams`` routes and the wiring of :class:`TeamService`
to the supervisor: member turns are its jobs, job ends reach the teams through an
outcome hook, the drop-folder watcher runs for the daemon's life.

``GET /teams`` · ``POST /teams`` ``{"name", "members": {NAME: {"body", "role"}},
"coordinator", "persistent"}`` · ``GET /teams/{name}`` · ``POST /teams/{name}/send``
``{"to", "text", "kind"?, "from"?}`` · ``POST /teams/{name}/steer`` ``{"member",
"text"}`` · ``POST /teams/{name}/run`` ``{"task", "cwd", "assign"?}`` · ``POST
/teams/{name}/teardown`` ``{"force"}`` · ``GET /teams/{name}/messages?member=`` ·
``POST /teams/{name}/inbox`` ``{"member", "job_id"?}`` (with a ``job_id``, what is
taken waits for ``POST /teams/{name}/ack`` ``{"ids"}`` or that job's end) · ``GET
/teams/by-session/{session_id}``. Errors by the one table of :mod:`chorus.web`:
400 bad input (nothing written), 404 unknown team, member or record.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from chorus._errors import ChorusError, NotFoundError
from chorus._json_input import read_object
from chorus.bodies import check_installed
from chorus.daemon._outcomes import JobEnd
from chorus.daemon._supervisor import Supervisor
from chorus.events import Notice
from chorus.teams import (
    Dropped,
    Member,
    TeamError,
    TeamService,
    build,
    watch_drops,
)
from chorus.web import bad_request, guarded

log = logging.getLogger("chorus.daemon")
Handler = Callable[[Request], Awaitable[Response]]


class SupervisorJobs:
    """:class:`chorus.teams.Jobs` on the daemon's supervisor."""

    def __init__(self, sup: Supervisor) -> None:
        self.sup = sup
        self.store = sup.store

    def wake(self) -> None:
        self.sup.wake()

    def body_problem(self, body: str) -> str | None:
        try:
            check_installed(body, self.sup.config)
        except ChorusError as exc:
            return str(exc)
        return None

    def steers_natively(self, session_id: str) -> bool:
        session = self.sup.hub.get(session_id)
        return bool(session is not None and session.steers_natively)

    async def steer(self, job_id: str, text: str) -> dict[str, Any]:
        return await self.sup.steer(job_id, text)

    async def interrupt(self, job_id: str) -> str:
        return await self.sup.interrupt(job_id)

    async def note(self, job_id: str, message: str) -> None:
        job = await self.store.get_job(job_id)
        await self.sup.note(job, Notice(message=message, kind="team"))

    async def close_session(self, session_id: str) -> None:
        await self.sup.hub.close(session_id)


def _guarded(fn: Handler) -> Handler:
    """``fn`` with errors answered by the one table (:mod:`chorus.web`); a value of
    the wrong shape in the request (pydantic, a missing key) is a bad request."""
    table = guarded(fn)

    async def handler(request: Request) -> Response:
        try:
            return await table(request)
        except (ValueError, KeyError) as exc:
            return bad_request(f"bad request: {exc}")

    return handler


async def _body(request: Request) -> dict[str, Any]:
    return await read_object(request, empty={})


def _text(data: dict[str, Any], key: str) -> str:
    value = data.get(key)
    if not isinstance(value, str):
        raise TeamError(f"{key!r} must be a string")
    return value


def _optional_id(data: dict[str, Any]) -> str | None:
    """A sender's own message id makes a retried send a no-op (``check_id`` rules)."""
    value = data.get("id")
    if value is None:
        return None
    if not isinstance(value, str) or not value.isalnum() or len(value) > 64:
        raise TeamError("'id' must be letters and digits (at most 64)")
    return value


def team_routes(sup: Supervisor, after: asyncio.Event | None = None) -> list[BaseRoute]:
    """The routes; also hooks the service onto the supervisor and starts the watcher
    (once ``after`` is set, if given: the daemon's start need not wait for it)."""
    service = TeamService(SupervisorJobs(sup))
    service.activate()

    async def on_end(end: JobEnd) -> None:
        ended = end.ended
        error = ended.error.message if ended.error is not None else ""
        await service.ended(end.job, ended.state, ended.result, error)

    sup.outcomes.subscribe(JobEnd, on_end)
    _start_background(service, after)
    return _routes(service)


def _start_background(service: TeamService, after: asyncio.Event | None) -> None:
    async def post(team: str, member: str, message: Dropped) -> None:
        await service.send(
            team,
            member,
            message.text,
            kind=message.kind,
            sender=message.sender,
            message_id=message.id,
        )

    async def background() -> None:
        if after is not None:
            await after.wait()
        await service.recover()
        while True:
            try:
                await watch_drops(post)
            except Exception:
                log.exception("teams: the drop-folder watcher failed; restarting it")
                await asyncio.sleep(1.0)

    with contextlib.suppress(RuntimeError):  # no running loop: routes for a test app
        task = asyncio.get_running_loop().create_task(background(), name="team-drops")
        _BACKGROUND.add(task)


_BACKGROUND: set[asyncio.Task[None]] = set()


def _routes(service: TeamService) -> list[BaseRoute]:
    async def listing(request: Request) -> Response:
        return JSONResponse(await service.list_all())

    async def create(request: Request) -> Response:
        data = await _body(request)
        raw = data.get("members")
        if not isinstance(raw, dict):
            raise TeamError('\'members\' must map member names to {"body", "role"}')
        team = build(
            _text(data, "name"),
            {str(k): Member.model_validate(v) for k, v in raw.items()},
            str(data.get("coordinator") or "claude"),
            bool(data.get("persistent", False)),
        )
        return JSONResponse(await service.create(team), status_code=201)

    async def status(request: Request) -> Response:
        return JSONResponse(await service.status(request.path_params["name"]))

    async def send(request: Request) -> Response:
        data = await _body(request)
        sent = await service.send(
            request.path_params["name"],
            _text(data, "to"),
            _text(data, "text"),
            kind=str(data.get("kind") or "status"),
            sender=str(data.get("from") or "user"),
            message_id=_optional_id(data),
        )
        return JSONResponse(sent, status_code=201)

    async def steer(request: Request) -> Response:
        data = await _body(request)
        name, member = request.path_params["name"], _text(data, "member")
        sent = await service.send(name, member, _text(data, "text"), kind="steer")
        return JSONResponse(sent, status_code=201)

    async def run(request: Request) -> Response:
        data = await _body(request)
        assign = data.get("assign") or None
        if assign is not None and not isinstance(assign, dict):
            raise TeamError("'assign' must map members to their tasks")
        started = await service.run(
            request.path_params["name"], str(data.get("task") or ""), _text(data, "cwd"), assign
        )
        return JSONResponse(started, status_code=201)

    async def teardown(request: Request) -> Response:
        data = await _body(request)
        force = bool(data.get("force", False))
        return JSONResponse(await service.teardown(request.path_params["name"], force=force))

    async def messages(request: Request) -> Response:
        member = request.query_params.get("member")
        return JSONResponse(await service.messages(request.path_params["name"], member))

    async def inbox(request: Request) -> Response:
        data = await _body(request)
        job = data.get("job_id")
        taken = await service.inbox(
            request.path_params["name"], _text(data, "member"), job_id=job if job else None
        )
        return JSONResponse(taken)

    async def ack(request: Request) -> Response:
        ids = (await _body(request)).get("ids")
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            raise TeamError("'ids' must be a list of message ids")
        return JSONResponse({"acked": await service.ack(request.path_params["name"], ids)})

    async def by_session(request: Request) -> Response:
        found = service.member_of(request.path_params["session_id"])
        if found is None:
            raise NotFoundError("this session is not a team member's")
        return JSONResponse({"team": found[0], "member": found[1]})

    def route(path: str, fn: Handler, method: str = "GET") -> Route:
        return Route(path, _guarded(fn), methods=[method])

    return [
        route("/teams", listing),
        route("/teams", create, "POST"),
        route("/teams/by-session/{session_id}", by_session),
        route("/teams/{name}", status),
        route("/teams/{name}/send", send, "POST"),
        route("/teams/{name}/steer", steer, "POST"),
        route("/teams/{name}/run", run, "POST"),
        route("/teams/{name}/teardown", teardown, "POST"),
        route("/teams/{name}/messages", messages),
        route("/teams/{name}/inbox", inbox, "POST"),
        route("/teams/{name}/ack", ack, "POST"),
    ]
