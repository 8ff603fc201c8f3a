"""The dashboard's ASGI app: pages (Jinja2), a JSON API for the pages' script, and
one SSE stream per job.

Every request passes :func:`_guard` first: the ``Host`` must be the dashboard's
own (no DNS rebinding), the session cookie must be live (else 401 and nothing
else), and a POST must come from the dashboard's own ``Origin`` with the
session's CSRF token (else 403, nothing changed). Decisions made here are
audited like the CLI's (``via: dashboard``).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import (
    FileResponse,
    JSONResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from chorus._errors import ChorusError, UserError
from chorus._json_input import BadJsonError, read_object
from chorus.dashboard import _actions
from chorus.dashboard._auth import COOKIE, CSRF_HEADER, BrowserSession, DashboardAuth
from chorus.dashboard._live import Snapshot, live_sse
from chorus.dashboard._render import code_css
from chorus.dashboard._stream import event_data, job_sse, resume_seq
from chorus.dashboard._teams import team_messages, team_views
from chorus.dashboard._views import (
    CostBook,
    friendly,
    job_live,
    job_rows,
    provider_rows,
    recent_folders,
    spend_by_body,
)
from chorus.flags import FlagDesk, board, decide
from chorus.jobs import JobPort, JobRequest
from chorus.store import (
    JobRecord,
    StoreError,
    resolve_job_id,
)
from chorus.web import error_response, json_error

if TYPE_CHECKING:
    from starlette.templating import Jinja2Templates

    from chorus.policy import AuditLog
    from chorus.routines import Scheduler

HERE = Path(__file__).parent
Handler = Callable[[Request], Awaitable[Response]]


@dataclass
class Dashboard:
    """What the app serves from: the daemon's parts and its own state."""

    sup: JobPort
    desk: FlagDesk | None
    sched: Scheduler | None = None
    auth: DashboardAuth = field(default_factory=DashboardAuth)
    origins: set[str] = field(default_factory=set)
    ping_s: float = 15.0
    rotate_s: float | None = None
    costs: CostBook | None = None

    @property
    def audit(self) -> AuditLog | None:
        return self.sup.audit

    def allow_address(self, host: str, port: int) -> None:
        """Accept requests addressed to ``host:port`` (and localhost for loopback)."""
        names = {host, "localhost"} if host in ("127.0.0.1", "::1") else {host}
        for name in names:
            shown = f"[{name}]" if ":" in name else name
            self.origins.add(f"http://{shown}:{port}")


class _Templates:
    """The pages' Jinja2 templates, loaded on the first page (jinja2 costs the
    daemon's start)."""

    def __init__(self) -> None:
        self._loaded: Jinja2Templates | None = None

    def TemplateResponse(self, *args: Any, **kwargs: Any) -> Response:  # noqa: N802
        if self._loaded is None:
            self._loaded = _load_templates()
        return self._loaded.TemplateResponse(*args, **kwargs)


def _load_templates() -> Jinja2Templates:
    from starlette.templating import Jinja2Templates

    templates = Jinja2Templates(directory=str(HERE / "templates"))
    templates.env.filters["ago"] = _ago
    templates.env.filters["tojson_attr"] = lambda v: json.dumps(v)
    return templates


def _ago(ts: float | None) -> str:
    if not ts:
        return "-"
    delta = max(0.0, time.time() - ts)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if delta >= size:
            return f"{delta / size:.0f}{unit} ago"
    return f"{delta:.0f}s ago"


def _error(message: str, status: int, code: str = "bad_request") -> JSONResponse:
    return json_error(message, code, status)


def _fail(exc: Exception) -> JSONResponse:
    """Chorus's errors by the one table of :mod:`chorus.web`."""
    return error_response(exc)


def build_dashboard_app(dash: Dashboard) -> Starlette:
    """The app; ``dash.allow_address`` must be called once the port is known."""
    templates = _Templates()
    dash.costs = dash.costs or CostBook(dash.sup.store)
    pages = _Pages(dash, templates)
    api = _Api(dash)
    guard = _Guard(dash, templates)

    def post(path: str, handler: Handler) -> Route:
        return Route(path, guard(handler, post=True), methods=["POST"])

    return Starlette(
        routes=[
            Route("/login", pages.login),
            Route("/", guard(pages.jobs)),
            Route("/jobs/{job_id}", guard(pages.job)),
            Route("/flags", guard(pages.flags)),
            Route("/routines", guard(pages.routines)),
            Route("/health", guard(pages.health)),
            Route("/memory", guard(pages.memory)),
            Route("/teams", guard(pages.teams)),
            Route("/api/teams/{team}/messages", guard(api.team_messages)),
            Route("/audit", guard(pages.audit_page)),
            Route("/api/live", guard(api.live)),
            Route("/api/jobs", guard(api.jobs)),
            post("/api/jobs", api.new_job),
            Route("/api/jobs/{job_id}/stream", guard(api.stream)),
            Route("/api/jobs/{job_id}/events", guard(api.events)),
            Route("/api/jobs/{job_id}/changes", guard(api.changes)),
            post("/api/jobs/{job_id}/merge", api.merge),
            post("/api/jobs/{job_id}/discard", api.discard),
            post("/api/jobs/{job_id}/steer", api.steer),
            post("/api/jobs/{job_id}/interrupt", api.interrupt),
            Route("/api/flags", guard(api.flags)),
            post("/api/flags/{flag_id}/{verb:str}", api.decide),
            post("/api/routines/{name}/run", api.run_routine),
            Route("/static/{name}", guard(_static)),
        ],
        middleware=[Middleware(_SecurityHeaders)],
    )


#: Every response: scripts and styles from the dashboard itself only (an injected
#: ``<script>`` or ``onerror=`` does not run), never framed (no clickjacked Allow).
SECURITY_HEADERS = [
    (
        b"content-security-policy",
        b"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
        b"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    ),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
]


class _SecurityHeaders:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *SECURITY_HEADERS]
            await send(message)

        await self.app(scope, receive, sending)


#: The only files under /static (served to a logged-in browser only).
STATIC = {"app.js": "text/javascript", "style.css": "text/css"}


async def _static(request: Request) -> Response:
    name = request.path_params["name"]
    if name == "code.css":
        return Response(code_css(), media_type="text/css")  # made once, on first use
    if name not in STATIC:
        return Response("not found", status_code=404, media_type="text/plain")
    return FileResponse(HERE / "static" / name, media_type=STATIC[name])


def _host_ok(dash: Dashboard, request: Request) -> bool:
    """The request is addressed to the dashboard itself (no DNS rebinding)."""
    host = request.headers.get("host", "")
    return f"http://{host}" in dash.origins


class _Guard:
    """Wrap a handler in the dashboard's checks (see the module's docstring)."""

    def __init__(self, dash: Dashboard, templates: _Templates) -> None:
        self.dash = dash
        self.templates = templates

    def __call__(self, handler: Handler, *, post: bool = False) -> Handler:
        async def guarded(request: Request) -> Response:
            refused = self.check(request, post=post)
            if refused is not None:
                return refused
            return await handler(request)

        return guarded

    def check(self, request: Request, *, post: bool) -> Response | None:
        if not _host_ok(self.dash, request):
            return Response("unknown host", status_code=403, media_type="text/plain")
        session = self.dash.auth.session(request.cookies.get(COOKIE))
        if session is None:
            return self.unauthorized(request)
        request.state.session = session
        if post and not self._post_ok(request, session):
            return _error("a POST needs the dashboard's own Origin and its CSRF token", 403)
        return None

    def _post_ok(self, request: Request, session: BrowserSession) -> bool:
        origin = request.headers.get("origin")
        if origin not in self.dash.origins:
            return False
        return self.dash.auth.csrf_ok(session, request.headers.get(CSRF_HEADER))

    def unauthorized(self, request: Request) -> Response:
        if request.url.path.startswith("/api/"):
            return _error("log in first: run `chorus dashboard` for a login URL", 401)
        return self.templates.TemplateResponse(request, "401.html", {}, status_code=401)


class _Pages:
    def __init__(self, dash: Dashboard, templates: _Templates) -> None:
        self.dash = dash
        self.templates = templates

    async def render(self, request: Request, name: str, **context: Any) -> Response:
        session: BrowserSession = request.state.session
        context.update(csrf=session.csrf, page=name.removesuffix(".html"))
        context.update(await _form_choices(self.dash))
        return self.templates.TemplateResponse(request, name, context)

    async def login(self, request: Request) -> Response:
        # Every check comes before the token is spent: a request the dashboard refuses
        # (another Host, as DNS rebinding sends) leaves the one-time token usable.
        if not _host_ok(self.dash, request):
            return Response("unknown host", status_code=403, media_type="text/plain")
        session = self.dash.auth.redeem(request.query_params.get("token", ""))
        if session is None:
            return self.templates.TemplateResponse(request, "401.html", {}, status_code=401)
        response = RedirectResponse("/", status_code=303)
        response.set_cookie(COOKIE, session.cookie, httponly=True, samesite="strict", path="/")
        return response

    async def jobs(self, request: Request) -> Response:
        return await self.render(request, "jobs.html")

    async def job(self, request: Request) -> Response:
        try:
            job = await _job(self.dash, request.path_params["job_id"])
        except (ChorusError, StoreError) as exc:
            return Response(str(exc), status_code=404, media_type="text/plain")
        store = self.dash.sup.store
        live = await job_live(store, job.id, await board(store))
        cwd = (await store.get_session(job.session_id)).cwd if job.session_id else None
        shown = {"live": live, "body_name": friendly(job.body), "cwd": cwd or ""}
        return await self.render(request, "job.html", job=job, error=job.error, **shown)

    async def flags(self, request: Request) -> Response:
        return await self.render(request, "flags.html")

    async def routines(self, request: Request) -> Response:
        try:
            rows = await self.dash.sched.describe() if self.dash.sched else []
        except StoreError as exc:  # routines need the SQLite store for now
            return await self.render(request, "routines.html", routines=[], off=str(exc))
        return await self.render(request, "routines.html", routines=rows, off=None)

    async def health(self, request: Request) -> Response:
        return await self.render(request, "health.html", rows=await _providers(self.dash))

    async def teams(self, request: Request) -> Response:
        return await self.render(request, "teams.html", teams=await team_views(self.dash.sup.store))

    async def memory(self, request: Request) -> Response:
        query = request.query_params.get("q", "").strip()
        hits = _memory_hits(self.dash, query) if query else []
        return await self.render(request, "memory.html", query=query, hits=hits)

    async def audit_page(self, request: Request) -> Response:
        from chorus.policy import AuditLog

        log = self.dash.audit or AuditLog()
        # The walk reads the whole log and the anchor asks the store: not on the loop.
        result = await asyncio.to_thread(log.verify)
        recent = list(log.entries(since=time.time() - 86400))[-50:]
        return await self.render(request, "audit.html", result=result, recent=reversed(recent))


async def _form_choices(dash: Dashboard) -> dict[str, Any]:
    """What the new-job form offers (on every page)."""
    from chorus.bodies import body_names
    from chorus.frameworks import FRAMEWORKS
    from chorus.policy import PERMISSION_MODES

    bodies = body_names(dash.sup.config)
    return {
        "form_bodies": [(b, friendly(b)) for b in bodies],
        "form_modes": PERMISSION_MODES,
        "form_frameworks": FRAMEWORKS,
        "form_folders": await recent_folders(dash.sup.store),
    }


async def _providers(dash: Dashboard) -> list[dict[str, Any]]:
    """Each body's health, friendly-named, with its spend over the last day."""
    sup = dash.sup
    bodies = list(sup.config.router.bodies)
    missing = {b: why for b in bodies if (why := sup.unready(b))}
    rows = provider_rows(sup.health.to_json(), bodies, missing, time.time())
    assert dash.costs is not None
    spend = await spend_by_body(sup.store, dash.costs, time.time() - 86400)
    return [{**row, "spend_usd": spend.get(row["body"])} for row in rows]


def _memory_hits(dash: Dashboard, query: str) -> list[dict[str, Any]]:
    from chorus.memory import Memory

    with Memory.open(dash.sup.config.memory) as mem:
        hits = mem.search(query, limit=20)
    return [{"ref": h.ref, "source": h.source, "text": h.text, "score": h.score} for h in hits]


async def _job(dash: Dashboard, raw: str) -> JobRecord:
    store = dash.sup.store
    return await store.get_job(await resolve_job_id(store, raw))


class _Api:
    def __init__(self, dash: Dashboard) -> None:
        self.dash = dash

    async def jobs(self, request: Request) -> Response:
        pending = await board(self.dash.sup.store)
        assert self.dash.costs is not None
        rows = await job_rows(self.dash.sup.store, pending, self.dash.costs)
        return JSONResponse(rows)

    async def new_job(self, request: Request) -> Response:
        try:
            payload = await read_object(request, what="the new job")
            job = await _actions.new_job(self.dash.sup, payload)
        except BadJsonError as exc:
            return _error(str(exc), 400, exc.code)
        except (ChorusError, StoreError) as exc:
            return _fail(exc)
        return JSONResponse({"job_id": job.id, "url": f"/jobs/{job.id}"}, status_code=201)

    async def live(self, request: Request) -> Response:
        """``?topics=jobs,board,teams,job:<id>``: one stream of what the page shows."""
        try:
            topics = await self._topics(request.query_params.get("topics", ""))
        except (ChorusError, StoreError) as exc:
            return _fail(exc)
        body = live_sse(topics, ping_s=self.dash.ping_s)
        headers = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
        return StreamingResponse(body, media_type="text/event-stream", headers=headers)

    async def _topics(self, raw: str) -> dict[str, Snapshot]:
        fixed: dict[str, tuple[str, Snapshot]] = {
            "jobs": ("jobs", self._jobs_rows),
            "board": ("board", self._board_of(all_flags=False)),
            "board:all": ("board", self._board_of(all_flags=True)),
            "teams": ("teams", self._teams),
            "health": ("health", self._health),
        }
        topics: dict[str, Snapshot] = {}
        for name in [t for t in raw.split(",") if t][:8]:
            if name in fixed:
                topics[fixed[name][0]] = fixed[name][1]
            elif name.startswith("job:"):
                job = await _job(self.dash, name[4:])
                topics["job"] = self._job_snapshot(job.id)
            else:
                known = ", ".join(fixed)
                raise UserError(f"unknown topic {name[:40]!r}: {known} or job:<id>")
        return topics

    async def _jobs_rows(self) -> list[dict[str, Any]]:
        assert self.dash.costs is not None
        store = self.dash.sup.store
        return await job_rows(store, await board(store), self.dash.costs)

    def _board_of(self, *, all_flags: bool) -> Snapshot:
        async def snap() -> list[dict[str, Any]]:
            items = await board(self.dash.sup.store, all_flags=all_flags)
            return [item.to_json() for item in reversed(items)]

        return snap

    async def _health(self) -> list[dict[str, Any]]:
        rows = await _providers(self.dash)
        return [{**row, "cooldown_s": round(row["cooldown_s"])} for row in rows]

    async def _teams(self) -> list[dict[str, Any]]:
        store = self.dash.sup.store
        views = await team_views(store)
        for view in views:
            view["messages"] = (await team_messages(store, view["name"]))[-200:]
        return views

    def _job_snapshot(self, job_id: str) -> Snapshot:
        async def snap() -> dict[str, Any]:
            store = self.dash.sup.store
            return await job_live(store, job_id, await board(store))

        return snap

    async def changes(self, request: Request) -> Response:
        try:
            job = await _job(self.dash, request.path_params["job_id"])
            return JSONResponse(await _actions.changes(self.dash.sup.store, job))
        except (ChorusError, StoreError) as exc:
            return _fail(exc)

    async def merge(self, request: Request) -> Response:
        try:
            payload = await read_object(request, empty={}, what="the merge")
            squash = payload.get("squash", False)
            if not isinstance(squash, bool):
                raise BadJsonError("'squash' must be true or false")
            job = await _job(self.dash, request.path_params["job_id"])
            done = await _actions.merge(self.dash.sup.store, job, squash)
        except BadJsonError as exc:
            return _error(str(exc), 400, exc.code)
        except (ChorusError, StoreError) as exc:
            return _fail(exc)
        _audit_worktree(self.dash, job.id, "merge", done)
        return JSONResponse(done)

    async def discard(self, request: Request) -> Response:
        try:
            job = await _job(self.dash, request.path_params["job_id"])
            done = await _actions.discard(self.dash.sup.store, job)
        except (ChorusError, StoreError) as exc:
            return _fail(exc)
        _audit_worktree(self.dash, job.id, "discard", done)
        return JSONResponse(done)

    async def stream(self, request: Request) -> Response:
        try:
            job = await _job(self.dash, request.path_params["job_id"])
        except (ChorusError, StoreError) as exc:
            return _fail(exc)
        first = resume_seq(
            request.headers.get("last-event-id"), request.query_params.get("from_seq")
        )
        body = job_sse(
            self.dash.sup.store, job, first, ping_s=self.dash.ping_s, rotate_s=self.dash.rotate_s
        )
        headers = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
        return StreamingResponse(body, media_type="text/event-stream", headers=headers)

    async def events(self, request: Request) -> Response:
        """Older events of a job, for paging back: ``before`` (a seq) and ``limit``."""
        try:
            job = await _job(self.dash, request.path_params["job_id"])
            before = int(request.query_params.get("before", "0"))
            limit = min(1000, max(1, int(request.query_params.get("limit", "200"))))
        except ValueError:
            return _error("before and limit are numbers", 400)
        except (ChorusError, StoreError) as exc:
            return _fail(exc)
        first = max(1, before - limit)
        events = await self.dash.sup.store.read_events(
            job.session_id or "", from_seq=first, limit=max(0, before - first)
        )
        mine = [json.loads(event_data(e)) for e in events if e.job_id == job.id]
        return JSONResponse({"events": mine, "first_seq": first})

    async def steer(self, request: Request) -> Response:
        try:
            payload = await read_object(request, what="the steer request")
            text = payload.get("text", "")
            if not isinstance(text, str):
                return _error("bad steer request: 'text' must be a string", 400)
            mode: Literal["steer", "queue"] = "queue" if payload.get("mode") == "queue" else "steer"
            job = await _job(self.dash, request.path_params["job_id"])
            if mode == "queue":
                return JSONResponse(await _queue(self.dash, job, text))
            return JSONResponse(await self.dash.sup.steer(job.id, text))
        except BadJsonError as exc:
            return _error(str(exc), 400, exc.code)
        except (ChorusError, StoreError) as exc:
            return _fail(exc)

    async def interrupt(self, request: Request) -> Response:
        try:
            job = await _job(self.dash, request.path_params["job_id"])
            return JSONResponse({"result": await self.dash.sup.interrupt(job.id)})
        except (ChorusError, StoreError) as exc:
            return _fail(exc)

    async def team_messages(self, request: Request) -> Response:
        try:
            after = int(request.query_params.get("after", "0"))
        except ValueError:
            return _error("after is a number", 400)
        rows = await team_messages(self.dash.sup.store, request.path_params["team"], after=after)
        return JSONResponse(rows)

    async def flags(self, request: Request) -> Response:
        show_all = request.query_params.get("all") == "1"
        items = await board(self.dash.sup.store, all_flags=show_all)
        return JSONResponse([item.to_json() for item in reversed(items)])

    async def decide(self, request: Request) -> Response:
        verb = request.path_params["verb"]
        if verb not in ("approve", "reject"):
            return _error(f"unknown decision {verb!r}: approve or reject", 400)
        try:
            payload = await read_object(request, empty={}, what="the decision")
            choice, reason = _optional_text(payload, "choice"), _optional_text(payload, "reason")
            item = await decide(
                self.dash.sup.store,
                request.path_params["flag_id"],
                verb,
                choice=choice,
                reason=reason,
                by="dashboard",
            )
        except BadJsonError as exc:
            return _error(str(exc), 400, exc.code)
        except (ChorusError, StoreError) as exc:
            return _fail(exc)
        _audit(self.dash, item.id, verb, choice, reason)
        if self.dash.desk is not None:
            self.dash.desk.wake()
        return JSONResponse(item.to_json())

    async def run_routine(self, request: Request) -> Response:
        if self.dash.sched is None:
            return _error("routines are off in this daemon", 409)
        try:
            fired = await self.dash.sched.run_now(request.path_params["name"])
        except (ChorusError, StoreError) as exc:
            return _fail(exc)
        return JSONResponse(
            {"outcome": fired.outcome, "job_id": fired.job.id if fired.job else None}
        )


def _optional_text(payload: dict[str, Any], name: str) -> str | None:
    value = payload.get(name) or None
    if value is not None and not isinstance(value, str):
        raise BadJsonError(f"{name!r} must be a string")
    return value


async def _queue(dash: Dashboard, job: JobRecord, text: str) -> dict[str, Any]:
    """A follow-up job on the job's session: it runs when the session is free."""
    if not text.strip():
        raise UserError("the message is empty")
    follow = await dash.sup.submit(JobRequest(text, body=job.body, session_id=job.session_id))
    return {"job_id": job.id, "how": "queued_followup", "followup_job_id": follow.id}


def _audit_worktree(dash: Dashboard, job_id: str, action: str, done: dict[str, Any]) -> None:
    if dash.audit is not None:
        data = {"job": job_id, "action": action, "result": done}
        dash.audit.append("worktree_" + action, {**data, "source": "person", "via": "dashboard"})


def _audit(
    dash: Dashboard, flag_id: str, verb: str, choice: str | None, reason: str | None
) -> None:
    if dash.audit is None:
        return
    data = {"flag": flag_id, "decision": verb, "choice": choice, "note": reason}
    dash.audit.append("flag_answered", {**data, "source": "person", "via": "dashboard"})
