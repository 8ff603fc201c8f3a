"""``chorus schema``: the JSON Schema of canonical events and UCP v1 frames."""

from __future__ import annotations

import json

import typer

from chorus.cli._app import app


@app.command("schema")
def schema(
    which: str = typer.Argument("all", help="events, ucp or all"),
    as_json: bool = typer.Option(False, "--json", help="The same JSON (it always is)."),
) -> None:
    """Print the JSON Schema of the canonical events and/or UCP v1 envelopes."""
    from chorus.events import event_json_schema, ucp_json_schema

    if which not in ("events", "ucp", "all"):
        raise typer.BadParameter("expected events, ucp or all", param_hint="WHICH")
    out: dict[str, object] = {}
    if which in ("events", "all"):
        out["events"] = event_json_schema()
    if which in ("ucp", "all"):
        out["ucp"] = ucp_json_schema()
    typer.echo(json.dumps(out if which == "all" else next(iter(out.values())), indent=2))
