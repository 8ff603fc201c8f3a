"""The daemon's ``/worktrees`` routes: the daemon owns the store's one
writer and knows which jobs run, so ``chorus worktree ...`` goes through it.

``GET /worktrees`` lists them with their status; ``GET /worktrees/{job}`` is one
(with its unmerged commits); ``GET /worktrees/{job}/diff``; ``POST
/worktrees/{job}/merge`` ``{"squash": bool}``; ``POST /worktrees/{job}/rm``
``{"force": bool}``; ``POST /worktrees/prune``. Errors by the table of :mod:`chorus.web`.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from chorus import worktrees
from chorus._json_input import BadJsonError, read_object
from chorus.store import Store
from chorus.web import Handler, guarded


async def _flag(request: Request, name: str) -> bool:
    value = (await read_object(request, empty={})).get(name, False)
    if not isinstance(value, bool):
        raise BadJsonError(f"{name!r} must be true or false")
    return value


def worktree_routes(store: Store) -> list[BaseRoute]:
    """The routes, with errors answered by the one table of :mod:`chorus.web`."""

    async def list_all(request: Request) -> Response:
        return JSONResponse(await worktrees.list_all(store))

    async def one(request: Request) -> Response:
        rec = await worktrees.resolve(store, request.path_params["job_id"])
        return JSONResponse(await worktrees.describe(rec))

    async def diff(request: Request) -> Response:
        return JSONResponse({"diff": await worktrees.diff(store, request.path_params["job_id"])})

    async def merge(request: Request) -> Response:
        squash = await _flag(request, "squash")
        return JSONResponse(
            await worktrees.merge(store, request.path_params["job_id"], squash=squash)
        )

    async def remove(request: Request) -> Response:
        force = await _flag(request, "force")
        return JSONResponse(
            await worktrees.remove(store, request.path_params["job_id"], force=force)
        )

    async def prune(request: Request) -> Response:
        return JSONResponse(await worktrees.prune(store))

    def route(path: str, fn: Handler, method: str = "GET") -> Route:
        return Route(path, guarded(fn), methods=[method])

    return [
        route("/worktrees", list_all),
        route("/worktrees/prune", prune, "POST"),
        route("/worktrees/{job_id}", one),
        route("/worktrees/{job_id}/diff", diff),
        route("/worktrees/{job_id}/merge", merge, "POST"),
        route("/worktrees/{job_id}/rm", remove, "POST"),
    ]
