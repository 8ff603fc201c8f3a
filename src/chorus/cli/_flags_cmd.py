"""``chorus flags``, ``chorus approve``, ``chorus reject``, ``chorus flag answer`` and
``chorus dashboard``: one board for flags and approvals.

Decisions are written to the store (approvals to their flag files) without a
daemon; the daemon tells the job within a second (``[flags] check_every_s``), or
when it next starts.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
import webbrowser
from collections.abc import Awaitable, Callable
from typing import Any, Literal, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from chorus._errors import UserError
from chorus.cli._app import app
from chorus.config import load_config
from chorus.flags import BoardItem, board, decide
from chorus.policy import AuditLog
from chorus.store import Store, open_store

T = TypeVar("T")
console = Console(soft_wrap=True)
flag_app = typer.Typer(help="Answer a pending flag or approval.", no_args_is_help=True)
app.add_typer(flag_app, name="flag")


def _with_store(fn: Callable[[Store], Awaitable[T]]) -> T:
    async def run() -> T:
        async with open_store(load_config()) as store:
            return await fn(store)

    return asyncio.run(run())


@app.command("flags")
def flags_list(
    as_json: bool = typer.Option(False, "--json", help="One JSON array."),
    show_all: bool = typer.Option(False, "--all", help="Decided flags too."),
) -> None:
    """List flags (the job went on with a default) and approvals (a tool waits)."""
    items = _with_store(lambda store: board(store, all_flags=show_all))
    if as_json:
        typer.echo(json.dumps([item.to_json() for item in items]))
        return
    now = time.time()
    table = Table("id", "kind", "job", "status", "default / final in", "question", "answer with")
    for item in items:
        left = f"{item.default} in {max(0.0, item.deadline_at - now):.0f}s"
        final = left if item.status == "pending" else f"{item.status}: {item.choice}"
        job = (item.job_id or "-")[:12]
        table.add_row(
            item.id,
            item.kind,
            job,
            item.status,
            final,
            escape(item.question),
            escape(f"chorus approve {job} {item.id}"),
        )
    console.print(table)


def _decide(
    verb: Literal["approve", "reject"],
    job: str,
    flag: str | None,
    *,
    choice: str | None = None,
    reason: str | None = None,
) -> BoardItem:
    job_arg, flag_arg = (job, flag) if flag else (None, job)
    item = _with_store(
        lambda store: decide(
            store, flag_arg, verb, job=job_arg, choice=choice, reason=reason, by="cli"
        )
    )
    data = {"flag": item.id, "decision": verb, "choice": choice, "note": reason}
    AuditLog().append("flag_answered", {**data, "source": "person", "via": "cli"})
    return item


def _show(item: BoardItem, as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps(item.to_json()))
        return
    told = " (the job will be told)" if item.kind == "flag" and _overrules(item) else ""
    console.print(f"{item.id}: {item.status} {item.choice or ''}{told}".rstrip())


def _overrules(item: BoardItem) -> bool:
    return item.status == "rejected" or item.choice != item.default


@app.command("approve")
def approve(
    job: str = typer.Argument(..., metavar="JOB", help="The job (id or prefix), or the flag."),
    flag: str | None = typer.Argument(None, metavar="FLAG", help="The flag (id or prefix)."),
    option: str | None = typer.Option(None, "--option", help="Choose this option instead."),
    as_json: bool = typer.Option(False, "--json", help="The decided flag as JSON."),
) -> None:
    """Approve a flag (keep its default, or --option another) or allow an approval."""
    _show(_decide("approve", job, flag, choice=option), as_json)


@app.command("reject")
def reject(
    job: str = typer.Argument(..., metavar="JOB", help="The job (id or prefix)."),
    flag: str = typer.Argument(..., metavar="FLAG", help="The flag (id or prefix)."),
    reason: str | None = typer.Argument(None, metavar="REASON", help="Told to the job."),
    option: str | None = typer.Option(None, "--option", help="What it should do instead."),
    as_json: bool = typer.Option(False, "--json", help="The decided flag as JSON."),
) -> None:
    """Reject a flag's default (the job is told, with REASON) or deny an approval."""
    _show(_decide("reject", job, flag, choice=option, reason=reason), as_json)


@flag_app.command("answer")
def flag_answer(
    flag_id: str = typer.Argument(..., metavar="ID"),
    decision: str = typer.Argument(..., metavar="allow|deny"),
    note: str | None = typer.Option(None, help="Told to the model with a denial."),
    as_json: bool = typer.Option(False, "--json", help="The decided flag as JSON."),
) -> None:
    """Answer a flag or approval: allow = approve, deny = reject (first answer wins)."""
    if decision not in ("allow", "deny"):
        raise typer.BadParameter("the answer is allow or deny")
    verb: Literal["approve", "reject"] = "approve" if decision == "allow" else "reject"
    item = _decide(verb, flag_id, None, reason=note)
    if as_json:
        typer.echo(json.dumps(item.to_json()))
        return
    console.print(f"{item.id}: {item.choice if item.kind == 'approval' else item.status}")


@app.command("dashboard")
def dashboard(
    as_json: bool = typer.Option(False, "--json", help="The login URL as JSON."),
    no_open: bool = typer.Option(False, "--no-open", help="Print the URL only."),
) -> None:
    """Print a one-time login URL for the browser dashboard (and open it)."""
    from chorus.client import DaemonClient

    status, raw = DaemonClient().request("POST", "/dashboard/login")
    data: dict[str, Any] = json.loads(raw or b"{}")
    if status != 200:
        raise UserError(str(data.get("error", f"the daemon answered {status}")))
    if as_json:
        typer.echo(json.dumps(data))
        return
    typer.echo(data["url"])
    typer.echo("one-time link: it logs this browser in, then stops working", err=True)
    if not no_open and _has_browser():
        webbrowser.open(data["url"])


def _has_browser() -> bool:
    return sys.platform == "darwin" or bool(
        os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
    )
