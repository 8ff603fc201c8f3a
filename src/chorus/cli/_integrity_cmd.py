"""``chorus integrity status|accept FILE``: the guarded files against their
baselines, and taking a deliberate edit (a local operation: no daemon needed)."""

from __future__ import annotations

import json
from dataclasses import asdict

import typer

from chorus._errors import UserError
from chorus.cli._app import app
from chorus.integrity import GUARDED, FileState, Guardian

integrity_app = typer.Typer(
    help="SOUL.md, MEMORY.md, policy.toml, config.toml against their baselines.",
    no_args_is_help=True,
)
app.add_typer(integrity_app, name="integrity")

_JSON = typer.Option(False, "--json", help="JSON.")


def _line(state: FileState) -> str:
    if state.baseline is None:
        what = "no baseline yet (taken when the daemon next checks)"
    elif state.ok:
        what = "ok"
    else:
        what = f"CHANGED since its baseline: `chorus integrity accept {state.name}` keeps it"
    return f"{state.name:<12} {what}  ({state.path})"


@integrity_app.command("status")
def status(as_json: bool = _JSON) -> None:
    """Each guarded file: ok, changed, or not baselined yet; files put aside so far."""
    guardian = Guardian()
    states = guardian.status()
    kept = guardian.quarantined()
    if as_json:
        files = [{**asdict(s), "ok": s.ok} for s in states]
        typer.echo(json.dumps({"files": files, "quarantined": kept}))
        return
    for state in states:
        typer.echo(_line(state))
    typer.echo(f"quarantined: {len(kept)}" + "".join(f"\n  {k}" for k in kept))


@integrity_app.command("accept")
def accept(
    name: str = typer.Argument(..., help="SOUL.md, MEMORY.md, policy.toml or config.toml."),
    as_json: bool = _JSON,
) -> None:
    """Take the file as it is now as its baseline (an edit you made on purpose)."""
    if name not in GUARDED:
        raise UserError(f"{name!r} is not guarded; one of {', '.join(GUARDED)}")
    state = Guardian().accept(name)
    if as_json:
        typer.echo(json.dumps({**asdict(state), "ok": state.ok}))
        return
    typer.echo(f"{name}: baseline taken ({(state.baseline or 'file absent')[:12]})")
