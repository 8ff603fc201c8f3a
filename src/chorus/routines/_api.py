"""Daemon API routes for routines, mounted beside the daemon's own.

``GET /routines`` · ``POST /routines`` ``{"toml", "name"}`` · ``POST
/routines/{name}/run|enable|disable`` · ``GET /routines/{name}/history`` ·
``DELETE /routines/{name}`` · ``POST /heartbeat/run``. Errors by the one table of
:mod:`chorus.web`: 400 for bad input, 404 for an unknown routine or record.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from chorus._json_input import read_object
from chorus.config import chorus_home
from chorus.routines._errors import RoutineError, UnknownRoutineError
from chorus.routines._heartbeat import HEARTBEAT
from chorus.routines._ops import create_routine, remove_routine_file
from chorus.routines._scheduler import FireResult, Scheduler, firing_json
from chorus.web import bad_request, guarded


def _fired(result: FireResult) -> dict[str, Any]:
    job = asdict(result.job) if result.job else None
    if job is not None:
        job["state"] = str(job["state"])
    return {"routine": result.routine, "outcome": result.outcome, "job": job}


def routine_routes(sched: Scheduler) -> list[BaseRoute]:
    """The routes, bound to the daemon's scheduler."""

    async def listing(request: Request) -> Response:
        return JSONResponse(await sched.describe())

    async def create(request: Request) -> Response:
        payload = await read_object(request, what="the routine request")
        toml, name = payload.get("toml"), payload.get("name")
        if not isinstance(toml, str) or not isinstance(name, str | None):
            return bad_request("bad request: 'toml' must be a string (and 'name' a string or null)")
        routine = create_routine(chorus_home(), toml, name=name)
        sched.wake()
        return JSONResponse({"name": routine.name, "file": routine.file}, status_code=201)

    async def action(request: Request) -> Response:
        name, what = request.path_params["name"], request.path_params["action"]
        routine = sched.find(name)
        if what == "enable" and not routine.enabled:
            raise RoutineError(f"{routine.file}: routine.enabled is false: edit the file")
        if what == "run":
            return JSONResponse(_fired(await sched.run_now(name)))
        if what in ("enable", "disable"):
            record = await sched.store.set_routine_enabled(name, what == "enable")
            sched.wake()
            return JSONResponse({"name": name, "enabled": record.enabled})
        return bad_request(f"unknown action {what!r}")

    async def history(request: Request) -> Response:
        name = request.path_params["name"]
        try:
            limit = max(1, int(request.query_params.get("limit", "50")))
        except ValueError:
            return bad_request("limit must be a number")
        firings = await sched.store.list_firings(name, limit=limit)
        known = {*sched.load().valid, *(bad.name for bad in sched.loaded.invalid)}
        if not firings and name not in known:
            raise UnknownRoutineError(name)
        return JSONResponse([firing_json(f) for f in firings])

    async def remove(request: Request) -> Response:
        name = request.path_params["name"]
        path = remove_routine_file(chorus_home(), name)
        await sched.store.delete_routine(name)
        sched.wake()
        return JSONResponse({"name": name, "removed": str(path)})

    async def heartbeat(request: Request) -> Response:
        return JSONResponse(_fired(await sched.run_now(HEARTBEAT)))

    return [
        Route("/routines", listing),
        Route("/routines", guarded(create), methods=["POST"]),
        Route("/routines/{name}/history", guarded(history)),
        Route("/routines/{name}/{action}", guarded(action), methods=["POST"]),
        Route("/routines/{name}", guarded(remove), methods=["DELETE"]),
        Route("/heartbeat/run", guarded(heartbeat), methods=["POST"]),
    ]
