"""The daemon's ``/talk`` routes: ``chorus talk`` hands a session to its CLI's own
interactive UI under the session's policy, then brings what was said there into
the session's log.

``POST /talk/{session}`` answers the command to run in the person's terminal:
the CLI resuming the native session with the session's permission mode mapped to
the CLI's own flags and the policy's native rules (deny rules, writable roots,
policy file: what the session's one-shot body gets, ``chorus.policy.native_flags``;
not the long-lived body's ask rules, which the person could approve), inside
the same OS sandbox a body of the session gets
(``sandboxed`` false, with ``sandbox_note``, when ``[sandbox]`` is off or there is
no tool); it remembers where the CLI's transcript ends now. ``POST
/talk/{session}/end`` reads what the CLI added to its transcript since
(:mod:`chorus.bodies._talk`), appends it to the session's log with origin
``talk`` (one talk's under one ``turn_id``, ``talk-<hex>``: ``chorus log SESSION``
shows it as a block), and answers ``{"events": n, "turns": n}``. The caller pauses the session
before and resumes it after (``/sessions/{id}/pause``).
"""

from __future__ import annotations

import asyncio
import os
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from chorus._errors import UserError
from chorus.bodies import CLI_OF
from chorus.daemon._supervisor import Supervisor
from chorus.events import Event, Notice
from chorus.policy import PathContext, Policy
from chorus.sandbox import active as sandbox_active
from chorus.sandbox import tool_path
from chorus.store import SessionRecord, resolve_session_id
from chorus.web import guarded

if TYPE_CHECKING:  # the transcript readers load every CLI's codec: at a talk's start
    from chorus.bodies._talk import TranscriptMark

#: ``origin`` of the events a talk brought in (replay compares only ``codec`` ones).
ORIGIN_TALK = "talk"
#: How each CLI resumes a session in its interactive UI. Codex's UI may join (or
#: start, in a session of its own that outlives the UI: seen without per-run ``-c``
#: overrides) a shared background app-server; ``--no-daemon`` keeps the app-server
#: in the UI's own process, inside the talk's sandbox, ended with it.
RESUME_ARGS = {"claude": ["--resume"], "codex": ["resume", "--no-daemon"], "gemini": ["--resume"]}
#: The one-shot body whose native flags map Chorus's modes to the CLI's own flags.
ONE_SHOT = {"claude": "claude-print", "codex": "codex-exec", "gemini": "gemini-headless"}
#: Codex's interactive UI asks the person before what its sandbox would refuse.
_CODEX_ASK = ("-a", "on-request")


def talk_routes(sup: Supervisor) -> list[BaseRoute]:
    """The routes (errors by the table of :mod:`chorus.web`)."""
    marks: dict[str, tuple[TranscriptMark, str]] = {}

    async def begin(request: Request) -> Response:
        from chorus.bodies._talk import mark

        record = await _talkable(sup, request.path_params["session_id"])
        plan = await _plan(sup, record)
        found = mark(_cli(record), plan["env_all"], record.native_session_id or "")
        if found is not None:
            marks[record.id] = (found, record.native_session_id or "")
        del plan["env_all"]
        return JSONResponse({**plan, "transcript": found.as_dict() if found else None})

    async def end(request: Request) -> Response:
        sid = await resolve_session_id(sup.store, request.path_params["session_id"])
        started = marks.pop(sid, None)
        if started is None:
            raise UserError(f"session {sid} has no talk under way")
        events = _one_talk(await asyncio.to_thread(_read, *started))
        if events:
            await sup.store.append_many(sid, events, origin=ORIGIN_TALK)
        turns = sum(1 for e in events if isinstance(e, Notice) and e.kind == "talk")
        return JSONResponse({"session_id": sid, "events": len(events), "turns": turns})

    return [
        Route("/talk/{session_id}", guarded(begin), methods=["POST"]),
        Route("/talk/{session_id}/end", guarded(end), methods=["POST"]),
    ]


def _one_talk(events: list[Event]) -> list[Event]:
    """The talk's events under one ``turn_id`` (``talk-<hex>``): ``chorus log SESSION``
    shows each talk as a block (they belong to no job)."""
    talk_id = f"talk-{uuid.uuid4().hex[:12]}"
    return [e.model_copy(update={"turn_id": talk_id}) for e in events]


def _read(start: TranscriptMark, native_id: str) -> list[Event]:
    from chorus.bodies._talk import read_since, talk_events

    return talk_events(start.cli, read_since(start, native_id))


def _cli(record: SessionRecord) -> str:
    return CLI_OF.get(record.body, record.body)


async def _talkable(sup: Supervisor, raw: str) -> SessionRecord:
    record = await sup.store.get_session(await resolve_session_id(sup.store, raw))
    cli = _cli(record)
    if cli not in RESUME_ARGS or not record.native_session_id:
        raise UserError(f"session {record.id} has no native session the {cli} CLI can resume")
    return record


async def _mode(sup: Supervisor, record: SessionRecord, policy: Policy) -> str:
    """The mode of the session's latest job that named one, else the policy's."""
    jobs = await sup.store.list_jobs(session_id=record.id)
    for job in reversed(jobs):
        mode = job.options.get("permission_mode")
        if isinstance(mode, str) and mode:
            return mode
    return policy.mode


async def _plan(sup: Supervisor, record: SessionRecord) -> dict[str, Any]:
    """The command, environment and folder of the talk, and what it runs under."""
    policy = sup.policy or Policy()
    cli, cwd = _cli(record), Path(record.cwd or os.getcwd())
    mode = await _mode(sup, record, policy)
    ctx = PathContext.current(cwd)
    from chorus.policy import native_flags  # with the policy's engine: at a talk

    flags = native_flags(ONE_SHOT[cli], policy, mode=_checked(mode), ctx=ctx)
    # the body's own env (agent env, the policy's secrets) and the same sandbox wrapper
    exe, env = sup.hub.launcher.interactive(record.body, cwd, dict(flags.env))
    given = {k: v for k, v in env.items() if os.environ.get(k) != v}
    asks = list(_CODEX_ASK) if cli == "codex" and flags.mode != "bypassPermissions" else []
    args = [*RESUME_ARGS[cli], record.native_session_id or "", *flags.args, *asks]
    sandboxed = sandbox_active(sup.config.sandbox.mode) and tool_path() is not None
    return {
        "session_id": record.id,
        "cli": cli,
        "argv": [str(exe), *args],
        "cwd": str(cwd),
        "env": given,
        "env_all": env,
        "mode": flags.mode,
        "notes": list(flags.notes),
        "sandboxed": sandboxed,
        "sandbox_note": None if sandboxed else _unsandboxed(sup.config.sandbox.mode),
    }


def _checked(mode: str) -> Any:
    from chorus.session import checked_mode

    return checked_mode(mode)


def _unsandboxed(mode: str) -> str:
    if mode == "off":
        return 'the CLI runs without Chorus\'s OS sandbox ([sandbox] mode = "off")'
    return "the CLI runs without Chorus's OS sandbox (no sandbox tool on this system)"
