"""``chorus memory …``, ``chorus context show`` and ``chorus mcp``."""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from chorus._errors import UserError
from chorus.cli._app import app
from chorus.config import load_config
from chorus.events import MemoryChanged
from chorus.memory import Hit, Memory, MemoryItem, record_changes

console = Console(soft_wrap=True)
memory_app = typer.Typer(help="What Chorus remembers: items, MEMORY.md, daily notes.")
context_app = typer.Typer(help="What a body gets before it starts.", no_args_is_help=True)
app.add_typer(memory_app, name="memory", no_args_is_help=True)
app.add_typer(context_app, name="context")

_JSON = typer.Option(False, "--json", help="Print JSON instead of text.")
_TYPE = typer.Option(
    None, "--type", "-t", help="profile, preference, decision, fact, event or procedure."
)

_CWD = typer.Option(None, "--cwd", help="Working directory (default: here).")

#: Which channel each built-in body receives the context through.
CHANNELS = {
    "claude": "--append-system-prompt",
    "claude-print": "--append-system-prompt",
    "codex": "-c developer_instructions",
    "codex-exec": "-c developer_instructions",
    "gemini": "first prompt (ACP)",
    "gemini-headless": "first prompt",
}


def _open() -> Memory:
    return Memory.open(load_config().memory)


def _warn(mem: Memory) -> None:
    for warning in dict.fromkeys(mem.warnings):
        typer.echo(f"warning: {warning}", err=True)


def _log(events: list[MemoryChanged]) -> None:
    """Append the writes to the event log (session ``memory``)."""
    from chorus.store import SqliteStore

    async def run() -> None:
        async with SqliteStore() as store:
            await record_changes(store, events)

    asyncio.run(run())


def _item_line(item: MemoryItem) -> str:
    return escape(f"{item.id}  [{item.kind}] {item.text}")


def _emit(data: Any) -> None:
    typer.echo(json.dumps(data, ensure_ascii=False))


@memory_app.command("add")
def add(
    text: str = typer.Argument(..., help="What to remember."),
    kind: str = typer.Option("fact", "--type", "-t", help=_TYPE.help),
    importance: float = typer.Option(0.5, help="0..1; raises the item in search."),
    supersedes: str = typer.Option(None, help="Id of an item this one replaces."),
    as_json: bool = _JSON,
) -> None:
    """Remember TEXT as a typed item (a duplicate reinforces the existing item)."""
    with _open() as mem:
        result = mem.add(text, kind, importance=importance, supersedes=supersedes)
    _log(result.events)
    if as_json:
        _emit({"op": result.op, "item": result.item.to_dict()})
        return
    verb = "added" if result.op == "add" else "reinforced"
    console.print(f"{verb} {_item_line(result.item)}")


@memory_app.command("note")
def note(text: str = typer.Argument(...), as_json: bool = _JSON) -> None:
    """Append TEXT to today's daily note."""
    with _open() as mem:
        path = mem.note(text)
    _emit({"path": str(path)}) if as_json else console.print(f"noted in {path}")


@memory_app.command("search")
def search(
    query: str = typer.Argument(...),
    limit: int = typer.Option(10, min=1, max=100),
    as_json: bool = _JSON,
) -> None:
    """Search items, MEMORY.md and daily notes (BM25, salience)."""
    with _open() as mem:
        hits = mem.search(query, limit=limit)
        _warn(mem)
    if as_json:
        _emit([h.to_dict() for h in hits])
        return
    if not hits:
        console.print("nothing found")
    for hit in hits:
        console.print(_hit_line(hit))


def _hit_line(hit: Hit) -> str:
    where = hit.item.id if hit.item else hit.ref
    kind = f"[{hit.item.kind}] " if hit.item else ""
    return escape(f"{hit.score:.4f}  {where}  {kind}{hit.text.splitlines()[0][:160]}")


@memory_app.command("list")
def list_items(
    kind: str = _TYPE,
    show_all: bool = typer.Option(False, "--all", help="Also superseded and forgotten items."),
    limit: int = typer.Option(100, min=1),
    as_json: bool = _JSON,
) -> None:
    """List items, most recently seen first."""
    with _open() as mem:
        mem.sync()
        items = mem.items(status=None if show_all else "active", kind=kind, limit=limit)
        _warn(mem)
    if as_json:
        _emit([i.to_dict() for i in items])
        return
    table = Table("id", "type", "status", "seen", "text")
    for i in items:
        table.add_row(i.id, i.kind, i.status, str(i.reinforcement), escape(i.text[:100]))
    console.print(table if items else "no memory items")


@memory_app.command("show")
def show(item_id: str = typer.Argument(...), as_json: bool = _JSON) -> None:
    """Show one item (any status) and its file."""
    with _open() as mem:
        item = mem.get(item_id)
        path = mem.layout.item_path(item_id)
    if as_json:
        _emit({**item.to_dict(), "path": str(path)})
        return
    for key, value in item.to_dict().items():
        if key != "text" and value is not None:
            console.print(f"{key}: {value}")
    console.print(f"file: {path}\n\n{escape(item.text)}")


@memory_app.command("forget")
def forget(item_id: str = typer.Argument(...), as_json: bool = _JSON) -> None:
    """Forget an item: out of search and context (its file is kept, marked)."""
    with _open() as mem:
        result = mem.forget(item_id)
    _log(result.events)
    _emit({"op": "forget", "id": item_id}) if as_json else console.print(f"forgot {item_id}")


@memory_app.command("edit")
def edit(
    item_id: str = typer.Argument(...),
    text: str = typer.Option(None, help="New text (without any option: open $EDITOR)."),
    kind: str = _TYPE,
    importance: float = typer.Option(None, help="0..1"),
    as_json: bool = _JSON,
) -> None:
    """Change an item: with options, or by hand in $EDITOR (then re-read)."""
    with _open() as mem:
        if text is None and kind is None and importance is None:
            mem.get(item_id)
            _run_editor(mem.layout.item_path(item_id))
            result = mem.reload_item(item_id)
        else:
            result = mem.edit(item_id, text=text, kind=kind, importance=importance)
        _warn(mem)
    _log(result.events)
    if as_json:
        _emit({"op": "edit", "item": result.item.to_dict()})
        return
    console.print(f"edited {_item_line(result.item)}")


def _run_editor(path: Path) -> None:
    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
    done = subprocess.run([*shlex.split(editor), str(path)], check=False)
    if done.returncode != 0:
        raise UserError(f"the editor exited with code {done.returncode}; nothing was changed")


@memory_app.command("reindex")
def reindex(as_json: bool = _JSON) -> None:
    """Rebuild the search index from the files (after editing them by hand)."""
    with _open() as mem:
        counts = mem.reindex()
        warnings = list(dict.fromkeys(mem.warnings))
    if as_json:
        _emit({**counts, "warnings": warnings})
        return
    for warning in warnings:
        typer.echo(f"warning: {warning}", err=True)
    console.print(
        f"indexed {counts['items']} active items ({counts['all_items']} in all), "
        f"{counts['chunks']} note chunks from {counts['files']} files"
    )


@context_app.command("show")
def context_show(
    body: str = typer.Option(None, "--body", "-b", help="The body whose view to show."),
    cwd: Path = _CWD,
    task: str = typer.Option(
        "", "--prompt", "--task", help="The job's prompt (picks the relevant items)."
    ),
    plan: str = typer.Option(None, "--plan", help="The active job's plan (the last section)."),
    then: str = typer.Option(
        None, "--next", help="A later prompt: show the memory block the warm body gets with it."
    ),
    as_json: bool = _JSON,
) -> None:
    """Print exactly the context a body would get, and its MCP servers."""
    from chorus.bodies import body_names
    from chorus.context import assemble, context_items, recall_block
    from chorus.mcpserver import SERVER_NAME, channel_url_shape

    config = load_config()
    if body is not None and body not in body_names(config):
        raise UserError(f"unknown body {body!r}; use one of {', '.join(body_names(config))}")
    where = (cwd or Path.cwd()).expanduser().resolve()
    if not where.is_dir():
        raise UserError(f"{where} is not a directory")
    with Memory.open(config.memory) as mem:
        ctx = assemble(where, task, memory=mem, plan=plan)
        settings = mem.settings
    block, ids = recall_block(then, context_items(ctx.text), settings) if then else ("", [])
    if as_json:
        channel = CHANNELS.get(body or "", "first prompt (ACP)") if body else None
        servers = {SERVER_NAME: {"type": "http", "url": channel_url_shape()}}
        recall = {"text": block, "items": ids} if then else None
        shown = {"body": body, "channel": channel, **ctx.to_dict(), "mcp_servers": servers}
        _emit({**shown, "next": recall})
        return
    typer.echo(ctx.text, nl=False)
    if then:
        typer.echo(f"\n# Before the later prompt\n\n{block or '(nothing new to recall)'}")
    for note_text in ctx.notes:
        typer.echo(f"note: {note_text}", err=True)


@app.command("mcp")
def mcp(
    session: str = typer.Option(None, "--session", help="The calling session's id."),
    job: str = typer.Option(None, "--job", help="The calling job's id."),
) -> None:
    """Serve Chorus's MCP tools on stdio, for use by hand (bodies reach them through
    their session's channel instead)."""
    from chorus.daemon import install_tools
    from chorus.mcpserver import serve_stdio

    install_tools()
    try:
        asyncio.run(serve_stdio(session, job))
    except KeyboardInterrupt:
        sys.exit(0)
