"""``chorus usage``: tokens and cost per body, model, day or session, from the log.

Read-only (never starts a daemon). Tokens and cost come from the meter's
``metered`` events (each model request, with the usage its API stated and its price)
for every job the meter saw, and from the usage and cost a body reported with its
completed turns for a job it did not see: never both for one job. ``turns`` counts
completed turns, ``requests`` metered model requests. A turn's model is the one the
session last announced (``session_started`` or a usage event), else the session's
own; a request's is the one its API named."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass

import typer

from chorus.cli._app import app
from chorus.cli._policy_cmd import parse_since
from chorus.events import Event, Metered, SessionStarted, TurnCompleted, Usage, UsageUpdate
from chorus.store import SessionRecord, SqliteStore, default_db_path

KEYS = ("body", "model", "day", "session")
_PAGE = 100_000


@dataclass
class UsageRow:
    key: str
    turns: int = 0
    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    reasoning_tokens: int = 0
    cost_usd: float = 0.0

    def add(self, event: TurnCompleted | Metered, *, counted: bool) -> None:
        """A completed turn (its tokens and cost only when ``counted``) or a request."""
        if isinstance(event, TurnCompleted):
            self.turns += 1
        else:
            self.requests += 1
        if counted:
            self._spend(event.usage, event.cost_usd)

    def _spend(self, usage: Usage | None, cost: float | None) -> None:
        if usage is not None:
            self.input_tokens += usage.input_tokens
            self.output_tokens += usage.output_tokens
            self.cached_input_tokens += usage.cached_input_tokens
            self.reasoning_tokens += usage.reasoning_tokens
        self.cost_usd += cost or 0.0


def tally(
    logs: Iterable[tuple[SessionRecord, list[Event]]], *, since: float, by: str
) -> list[UsageRow]:
    """Completed turns and metered requests since ``since``, summed per ``by`` key,
    biggest cost first."""
    rows: dict[str, UsageRow] = {}
    for session, events in logs:
        metered = {e.job_id for e in events if isinstance(e, Metered)}
        model = session.model or "default"
        for event in events:
            if isinstance(event, SessionStarted | UsageUpdate) and event.model:
                model = event.model
            if isinstance(event, TurnCompleted | Metered) and event.ts >= since:
                key = _key(by, session, event, model)
                counted = isinstance(event, Metered) or event.job_id not in metered
                rows.setdefault(key, UsageRow(key)).add(event, counted=counted)
    return sorted(rows.values(), key=lambda r: (-r.cost_usd, r.key))


def _key(by: str, session: SessionRecord, event: TurnCompleted | Metered, model: str) -> str:
    if by == "body":
        return event.body or session.body
    if by == "model":
        return (event.model if isinstance(event, Metered) else None) or model
    if by == "day":
        return dt.date.fromtimestamp(event.ts).isoformat()
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
    typer.echo(f"{by:<{width}}  turns  requests  tokens in  tokens out  cost")
    for r in [*rows, _total(rows)]:
        typer.echo(
            f"{r.key:<{width}}  {r.turns:>5}  {r.requests:>8}  {r.input_tokens:>9}"
            f"  {r.output_tokens:>10}  ${r.cost_usd:.4f}"
        )


def _total(rows: list[UsageRow]) -> UsageRow:
    total = UsageRow("total")
    for r in rows:
        for name, value in asdict(r).items():
            if name != "key":
                setattr(total, name, getattr(total, name) + value)
    return total
