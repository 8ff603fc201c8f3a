"""``chorus usage``: tokens and cost per body, model, day or session, from the log.

Read-only (never starts a daemon): every completed turn in the store counts once,
with the usage and cost its body reported; the model is the one the session last
announced (``session_started`` or a usage event), else the session's own."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass

import typer

from chorus.cli._app import app
from chorus.cli._policy_cmd import parse_since
from chorus.events import Event, SessionStarted, TurnCompleted, UsageUpdate
from chorus.store import SessionRecord, SqliteStore, default_db_path

KEYS = ("body", "model", "day", "session")
_PAGE = 100_000


@dataclass
class UsageRow:
    key: str
    turns: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    cost_usd: float = 0.0

    def add(self, turn: TurnCompleted) -> None:
        self.turns += 1
        if turn.usage is not None:
            self.input_tokens += turn.usage.input_tokens
            self.output_tokens += turn.usage.output_tokens
            self.cached_input_tokens += turn.usage.cached_input_tokens
        self.cost_usd += turn.cost_usd or 0.0


def tally(
    logs: Iterable[tuple[SessionRecord, list[Event]]], *, since: float, by: str
) -> list[UsageRow]:
    """Completed turns since ``since``, summed per ``by`` key, biggest cost first."""
    rows: dict[str, UsageRow] = {}
    for session, events in logs:
        model = session.model or "default"
        for event in events:
            if isinstance(event, SessionStarted | UsageUpdate) and event.model:
                model = event.model
            if isinstance(event, TurnCompleted) and event.ts >= since:
                key = _key(by, session, event, model)
                rows.setdefault(key, UsageRow(key)).add(event)
    return sorted(rows.values(), key=lambda r: (-r.cost_usd, r.key))


def _key(by: str, session: SessionRecord, turn: TurnCompleted, model: str) -> str:
    if by == "body":
        return turn.body or session.body
    if by == "model":
        return model
    if by == "day":
        return dt.date.fromtimestamp(turn.ts).isoformat()
    return session.id


def _read_logs() -> list[tuple[SessionRecord, list[Event]]]:
    if not default_db_path().exists():
        return []

    async def read() -> list[tuple[SessionRecord, list[Event]]]:
        async with SqliteStore() as store:
            sessions = await store.list_sessions(limit=_PAGE)
            return [(s, await store.read_events(s.id)) for s in sessions]

    return asyncio.run(read())


@app.command()
def usage(
    since: str | None = typer.Option(None, help="Only turns since: 10m, 2h, 3d or a date."),
    by: str = typer.Option("body", help="Group by body, model, day or session."),
    as_json: bool = typer.Option(False, "--json", help="One JSON array of rows."),
) -> None:
    """Tokens and cost of completed turns, from the log (never starts a daemon)."""
    if by not in KEYS:
        raise typer.BadParameter(f"--by is one of {', '.join(KEYS)}")
    rows = tally(_read_logs(), since=parse_since(since) if since else 0.0, by=by)
    if as_json:
        typer.echo(json.dumps([asdict(r) for r in rows]))
        return
    if not rows:
        typer.echo("no completed turns" + (f" since {since}" if since else ""))
        return
    width = max(len(by), *(len(r.key) for r in rows))
    typer.echo(f"{by:<{width}}  turns  tokens in  tokens out  cost")
    for r in [*rows, _total(rows)]:
        typer.echo(
            f"{r.key:<{width}}  {r.turns:>5}  {r.input_tokens:>9}  {r.output_tokens:>10}"
            f"  ${r.cost_usd:.4f}"
        )


def _total(rows: list[UsageRow]) -> UsageRow:
    total = UsageRow("total")
    for r in rows:
        total.turns += r.turns
        total.input_tokens += r.input_tokens
        total.output_tokens += r.output_tokens
        total.cached_input_tokens += r.cached_input_tokens
        total.cost_usd += r.cost_usd
    return total
