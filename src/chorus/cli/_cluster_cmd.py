"""``chorus migrate --to postgresql://...`` and ``chorus nodes``: Chorus on a shared
PostgreSQL store."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Coroutine
from dataclasses import asdict
from pathlib import Path
from typing import Any, TypeVar

import typer
from rich.console import Console
from rich.table import Table

from chorus._errors import ChorusError, UserError
from chorus.cli._app import app
from chorus.config import ChorusConfig, load_config
from chorus.store import (
    NodeRecord,
    Redactor,
    StoreError,
    default_db_path,
    is_postgres_url,
    open_store,
    redact_url,
)

console = Console()
T = TypeVar("T")


def _run(work: Coroutine[Any, Any, T]) -> T:
    """Run ``work``; a Chorus error prints ``error: ...`` and exits 2 (bad input,
    unreachable database) or 1 (anything else)."""
    try:
        return asyncio.run(work)
    except ChorusError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2 if isinstance(exc, UserError) else 1) from None


@app.command()
def migrate(
    to: str = typer.Option(..., "--to", help="postgresql://user@host:port/database (empty)"),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Copy this home's SQLite log into an empty PostgreSQL database.

    Sessions, events, raw lines and jobs are copied. Stop the daemon first;
    running jobs are re-queued."""
    if not is_postgres_url(to):
        typer.echo(f"error: --to {redact_url(to)!r}: use postgresql://user@host:port/db", err=True)
        raise typer.Exit(2)
    source = default_db_path()
    if not source.exists():
        typer.echo(f"error: nothing to migrate: {source} does not exist", err=True)
        raise typer.Exit(2)
    counts = _run(_migrate(to, source))
    if as_json:
        typer.echo(json.dumps({"to": redact_url(to), "copied": counts}))
        return
    for table, count in counts.items():
        typer.echo(f"{table}: {count} rows")
    typer.echo(f'copied to {redact_url(to)}; now set [store] url = "{redact_url(to)}"')
    typer.echo("in config.toml (keep the password in PGPASSWORD or ~/.pgpass)")


async def _migrate(url: str, source: Path) -> dict[str, int]:
    import psycopg  # the driver loads for this command only, not for every ``chorus``

    from chorus.store import PostgresStore, copy_sqlite_to_postgres

    # Starting a store checks the URL (exit 2, password redacted) and migrates the schema.
    async with PostgresStore(url, redactor=Redactor(), listen=False):
        pass

    def copy() -> dict[str, int]:
        with psycopg.connect(url) as conn:
            return copy_sqlite_to_postgres(source, conn)

    try:
        return await asyncio.to_thread(copy)
    except psycopg.Error as exc:
        raise StoreError(f"migration rolled back: {exc}") from exc


@app.command()
def nodes(as_json: bool = typer.Option(False, "--json")) -> None:
    """The worker nodes of the store (daemons pointed at it) and what each runs."""
    found = _run(_nodes(load_config()))
    if as_json:
        typer.echo(json.dumps([asdict(node) for node in found]))
        return
    table = Table("node", "host", "bodies", "running", "last seen")
    now = time.time()
    for node in found:
        age = f"{max(0.0, now - node.last_seen):.0f}s ago"
        table.add_row(node.id, node.host, ", ".join(node.bodies), str(node.running), age)
    console.print(table)


async def _nodes(config: ChorusConfig) -> list[NodeRecord]:
    async with open_store(config) as store:
        return await store.list_nodes()
