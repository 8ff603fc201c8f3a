"""``chorus log SESSION``: a whole session's log, job by job and talk by talk.

A job's events are what ``chorus log JOB`` shows; the turns a person had in the
agent's own CLI (``chorus talk``) belong to no job: they come in with origin
``talk``, each talk's events under one ``turn_id`` (``talk-<hex>``). Read from the
store (never starts a daemon). ``--json``: every event of the session in seq
order, one per line, as ``chorus log JOB --json`` prints them, with
``"origin": "talk"`` added to a talk's; as text: a header per block (``job <id>``,
``talk <id>: N turn(s)``), then its events, a typed prompt as ``you <text>``.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from chorus._errors import UserError
from chorus.cli._render import Renderer, Write, plain_writer, rich_writer

if TYPE_CHECKING:
    from chorus.store import Store

#: ``origin`` of the events ``chorus talk`` brought in (``chorus.daemon``'s ORIGIN_TALK).
ORIGIN_TALK = "talk"
Block = tuple[str, str]


def is_session(raw: str) -> bool:
    """Whether ``raw`` names no job but a session (a unique id or prefix); neither:
    a clear error (exit 2)."""
    from chorus.store import UnknownJobError, open_store, resolve_job_id

    if not _store_exists():
        return False  # the job path says the job is unknown

    async def check() -> bool:
        async with open_store() as store:
            try:
                await resolve_job_id(store, raw)
                return False
            except UnknownJobError:
                await _session_id(store, raw)
                return True

    return asyncio.run(check())


def _store_exists() -> bool:
    """False for a SQLite store not made yet (reading would create it)."""
    from chorus.config import load_config
    from chorus.store import default_db_path

    return load_config().store.url is not None or default_db_path().exists()


async def _session_id(store: Store, raw: str) -> str:
    from chorus.store import UnknownSessionError, resolve_session_id

    try:
        return await resolve_session_id(store, raw)
    except UnknownSessionError:
        raise UserError(
            f"no job or session {raw!r} (see `chorus jobs`, `chorus sessions`)"
        ) from None


def session_events(raw: str) -> list[dict[str, Any]]:
    """The session's events in seq order, a talk's with ``origin`` ``talk``."""
    from chorus.events import event_to_json
    from chorus.store import open_store

    async def read() -> list[dict[str, Any]]:
        async with open_store() as store:
            sid = await _session_id(store, raw)
            events = await store.read_events(sid)
            talked = {e.seq for e in await store.read_events(sid, origin=ORIGIN_TALK)}
        return [_tagged(json.loads(event_to_json(e)), e.seq in talked) for e in events]

    return asyncio.run(read())


def _tagged(event: dict[str, Any], talked: bool) -> dict[str, Any]:
    return {**event, "origin": ORIGIN_TALK} if talked else event


def print_session(raw: str, as_json: bool) -> None:
    """``chorus log SESSION``: as JSON lines, or as text block by block."""
    events = session_events(raw)
    if as_json:
        for event in events:
            sys.stdout.write(json.dumps(event) + "\n")
        return
    write = rich_writer() if sys.stdout.isatty() else plain_writer()
    for block, members in blocks(events):
        _print_block(write, block, members)


def blocks(events: list[dict[str, Any]]) -> Iterator[tuple[Block, list[dict[str, Any]]]]:
    """Consecutive events of one job, one talk or the session itself, grouped."""
    current: Block | None = None
    members: list[dict[str, Any]] = []
    for event in events:
        key = block_of(event)
        if key != current and members:
            yield current or ("session", ""), members
            members = []
        current = key
        members.append(event)
    if members:
        yield current or ("session", ""), members


def block_of(event: dict[str, Any]) -> Block:
    """("talk", its id) for a talk's event, ("job", id) for a job's, else ("session", "")."""
    if event.get("origin") == ORIGIN_TALK:
        return ("talk", str(event.get("turn_id") or ""))
    if event.get("job_id"):
        return ("job", str(event["job_id"]))
    return ("session", "")


def _print_block(write: Write, block: Block, members: list[dict[str, Any]]) -> None:
    write([("bold", f"── {_header(block, members)}")], "\n")
    renderer = Renderer(write)
    for event in members:
        if _typed(event):
            renderer.close()
            seq = f"{event.get('seq', 0):>4} "
            write([("dim", seq), ("bold cyan", "you "), ("", str(event["message"]))], "\n")
        else:
            renderer.feed(event)
    renderer.close()


def _header(block: Block, members: list[dict[str, Any]]) -> str:
    kind, ident = block
    if kind == "talk":
        turns = sum(1 for e in members if _typed(e))
        name = f"talk {ident}" if ident else "talk"
        return f"{name}: {turns} turn(s) typed in the agent's own CLI"
    return f"job {ident}" if kind == "job" else "session"


def _typed(event: dict[str, Any]) -> bool:
    """A prompt the person typed in a talk."""
    return event.get("type") == "notice" and event.get("kind") == "talk"
