"""``chorus routine list|create|enable|disable|run|history|rm`` and ``chorus heartbeat run``.

``create`` validates and writes the file here (bad input exits 2 and writes
nothing; no daemon needed); the others go through the daemon, which runs the
scheduler.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from chorus._errors import UserError
from chorus.cli._app import app

console = Console(soft_wrap=True)

routine_app = typer.Typer(help="Scheduled, triggered and manual routines.", no_args_is_help=True)
heartbeat_app = typer.Typer(help="The HEARTBEAT.md checklist routine.", no_args_is_help=True)
app.add_typer(routine_app, name="routine")
app.add_typer(heartbeat_app, name="heartbeat")

JSON_OPT = typer.Option(False, "--json", help="Machine-readable output.")


def _request(method: str, path: str, body: Any = None, params: dict[str, str] | None = None) -> Any:
    from urllib.parse import urlencode

    from chorus.client import DaemonClient

    query = f"?{urlencode(params)}" if params else ""
    return DaemonClient().call(method, path + query, body)


def _when(ts: float | None) -> str:
    if ts is None:
        return "-"
    return dt.datetime.fromtimestamp(ts).astimezone().strftime("%Y-%m-%d %H:%M:%S %Z")


def _echo_json(data: Any) -> None:
    typer.echo(json.dumps(data, indent=2))


@routine_app.command("list")
def list_routines(as_json: bool = JSON_OPT) -> None:
    """Every routine: trigger, next fire time, last result, failing count.

    Invalid ones are listed with their error."""
    rows = _request("GET", "/routines")
    if as_json:
        _echo_json(rows)
        return
    table = Table("name", "trigger", "enabled", "next fire", "last", "failing")
    for row in rows:
        if not row["valid"]:
            table.add_row(row["name"], "[red]invalid[/red]", "-", "-", escape(row["error"]), "-")
            continue
        last = row["last"]
        last_text = f"{last['outcome']} {last['job_state'] or ''}".strip() if last else "-"
        enabled = "yes" if row["enabled"] else "no"
        table.add_row(
            row["name"],
            row["trigger"],
            enabled,
            _when(row["next_fire"]),
            last_text,
            str(row["failing"]),
        )
    console.print(table)
    for row in rows:
        if row.get("notice"):
            console.print(f"[yellow]{escape(row['name'])}:[/yellow] {escape(row['notice'])}")


@routine_app.command("create")
def create(
    file: Annotated[Path, typer.Option("--file", "-f", help="A routine TOML file.")],
    as_json: bool = JSON_OPT,
) -> None:
    """Validate a routine file and install it as CHORUS_HOME/routines/NAME.toml."""
    from chorus.config import chorus_home
    from chorus.routines import create_routine

    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read {file}: {exc}") from exc
    routine = create_routine(chorus_home(), text, name=file.stem)
    _poke_daemon()
    if as_json:
        _echo_json({"name": routine.name, "file": routine.file, "trigger": routine.kind})
        return
    console.print(f"routine {routine.name} created: {routine.file}")


def _poke_daemon() -> None:
    """A running daemon picks the file up at its next tick; this makes it now."""
    from chorus.client import DaemonClient, is_responding

    if is_responding():
        DaemonClient(autostart=False).call("GET", "/routines")


@routine_app.command("enable")
def enable(name: str, as_json: bool = JSON_OPT) -> None:
    """Let the routine fire again."""
    _switch(name, "enable", as_json)


@routine_app.command("disable")
def disable(name: str, as_json: bool = JSON_OPT) -> None:
    """Stop the routine from firing (its history stays)."""
    _switch(name, "disable", as_json)


def _switch(name: str, action: str, as_json: bool) -> None:
    data = _request("POST", f"/routines/{name}/{action}")
    if as_json:
        _echo_json(data)
        return
    console.print(f"routine {name} {'enabled' if data['enabled'] else 'disabled'}")


@routine_app.command("run")
def run(name: str, as_json: bool = JSON_OPT) -> None:
    """Fire the routine now and print its job id."""
    _show_fired(_request("POST", f"/routines/{name}/run"), as_json)


def _show_fired(data: dict[str, Any], as_json: bool) -> None:
    if as_json:
        _echo_json(data)
    elif data["job"]:
        typer.echo(data["job"]["id"])
    else:
        typer.echo(f"no job: {data['outcome']}")


@routine_app.command("history")
def history(
    name: str,
    limit: int = typer.Option(20, "--limit", "-n", min=1),
    as_json: bool = JSON_OPT,
) -> None:
    """The routine's firings, latest first, with their jobs' states."""
    rows = _request("GET", f"/routines/{name}/history", params={"limit": str(limit)})
    if as_json:
        _echo_json(rows)
        return
    table = Table("scheduled for", "kind", "outcome", "job", "state")
    for row in rows:
        table.add_row(
            _when(row["scheduled_for"]),
            row["kind"],
            row["outcome"],
            row["job_id"] or "-",
            row["job_state"] or "-",
        )
    console.print(table)


@routine_app.command("rm")
def remove(name: str, as_json: bool = JSON_OPT) -> None:
    """Delete the routine's file and scheduling state (its jobs stay)."""
    data = _request("DELETE", f"/routines/{name}")
    if as_json:
        _echo_json(data)
        return
    console.print(f"routine {name} removed ({data['removed']})")


@heartbeat_app.command("run")
def heartbeat_run(as_json: bool = JSON_OPT) -> None:
    """Check HEARTBEAT.md now: a job if it has unchecked items, none otherwise."""
    _show_fired(_request("POST", "/heartbeat/run"), as_json)
