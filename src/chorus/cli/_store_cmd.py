"""``chorus sessions list|show`` and ``chorus replay``: reading the durable log."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import json
from collections.abc import Awaitable, Callable
from typing import TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from chorus.cli._app import app
from chorus.cli._everyday import register_everyday
from chorus.events import Event
from chorus.store import (
    AmbiguousIdError,
    NoReplayCodecError,
    ReplayReport,
    SessionRecord,
    Store,
    UnknownSessionError,
    open_store,
    register_replay_codec,
    replay,
    resolve_session_id,
)

T = TypeVar("T")

sessions_app = typer.Typer(help="Inspect recorded sessions.", no_args_is_help=True)
app.add_typer(sessions_app, name="sessions")
register_everyday(sessions_app, "sessions")  # list: from the command table of ``_fast``
console = Console()

#: ``chorus replay`` exit codes.
EXIT_MATCH, EXIT_DIVERGED, EXIT_UNKNOWN = 0, 1, 2


def _with_store(use: Callable[[Store], Awaitable[T]]) -> T:
    """Open the store under CHORUS_HOME, run ``use`` on it, close it."""

    async def run() -> T:
        async with open_store() as store:
            return await use(store)

    return asyncio.run(run())


def _fail(message: str, code: int) -> typer.Exit:
    # Plain echo, not rich: a message is never re-wrapped to the terminal width.
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code)


def _when(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts).isoformat(sep=" ", timespec="seconds")


@sessions_app.command("show")
def show_session(
    session_id: str = typer.Argument(..., help="The session id."),
    as_json: bool = typer.Option(
        False, "--json", help='One JSON object: {"session": ..., "events": [...]}.'
    ),
) -> None:
    """Show one session and its events (exit 2 if it does not exist)."""

    async def load(store: Store) -> tuple[SessionRecord, list[Event]]:
        full = await resolve_session_id(store, session_id)
        return await store.get_session(full), await store.read_events(full)

    try:
        session, events = _with_store(load)
    except (UnknownSessionError, AmbiguousIdError) as exc:
        raise _fail(str(exc), EXIT_UNKNOWN) from exc
    if as_json:
        document = {
            "session": dataclasses.asdict(session),
            "events": [e.model_dump(mode="json") for e in events],
        }
        typer.echo(json.dumps(document, ensure_ascii=False))
        return
    _print_session(session, events)


def _print_session(session: SessionRecord, events: list[Event]) -> None:
    console.print(f"[bold]session[/bold] {escape(session.id)}")
    for label, value in (
        ("body", session.body),
        ("model", session.model),
        ("state", session.state),
        ("cwd", session.cwd),
        ("native id", session.native_session_id),
        ("created", _when(session.created_at)),
        ("updated", _when(session.updated_at)),
        ("events", str(session.last_seq)),
    ):
        console.print(f"  {label:10} {escape(value or '-')}")
    for event in events:
        console.print(f"{event.seq:>6} {_when(event.ts)} {event.type:22} {escape(_summary(event))}")


def _summary(event: Event, width: int = 100) -> str:
    """One line describing the event: its own fields, without the stamped ones."""
    data = event.model_dump(mode="json", exclude_none=True)
    for key in ("type", "session_id", "seq", "ts", "body"):
        data.pop(key, None)
    text = json.dumps(data, ensure_ascii=False)
    return text if len(text) <= width else text[: width - 1] + "…"


def _register_replay_codecs() -> None:
    """Every body's replay codec, config-defined ACP agents included."""
    from chorus.bodies import replay_codecs

    for body, factory in replay_codecs().items():
        register_replay_codec(body, factory)


@app.command("replay")
def replay_session(
    session_id: str = typer.Argument(..., help="The session id (or a unique prefix)."),
    as_json: bool = typer.Option(False, "--json", help="The report as one JSON object."),
) -> None:
    """Re-run a session's recorded output through its codec; compare with the log.

    Exit 0 on a match, 1 on a divergence, 2 for an unknown session or body."""
    _register_replay_codecs()

    async def run(store: Store) -> ReplayReport:
        return await replay(store, await resolve_session_id(store, session_id))

    try:
        report: ReplayReport = _with_store(run)
    except (UnknownSessionError, AmbiguousIdError, NoReplayCodecError) as exc:
        raise _fail(str(exc), EXIT_UNKNOWN) from exc
    if as_json:
        typer.echo(json.dumps({"ok": report.ok, **dataclasses.asdict(report)}, ensure_ascii=False))
        raise typer.Exit(EXIT_MATCH if report.ok else EXIT_DIVERGED)
    if report.ok:
        typer.echo(f"ok: {report.describe()}")
        raise typer.Exit(EXIT_MATCH)
    typer.echo(f"diverged: {report.describe()}", err=True)
    raise typer.Exit(EXIT_DIVERGED)
