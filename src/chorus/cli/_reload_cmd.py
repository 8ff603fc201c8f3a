"""``chorus reload``: check config.toml and policy.toml, take them as the integrity
guardian's baselines (the person's deliberate edit), and have the running daemon
apply them; it says which settings need a restart."""

from __future__ import annotations

import json

import typer

from chorus.cli._app import app


@app.command("reload")
def reload_cmd(as_json: bool = typer.Option(False, "--json", help="One JSON object.")) -> None:
    """Apply a changed config.toml and policy.toml to the running daemon.

    Bad settings: exit 2 naming the key, nothing applied. Settings that need a
    restart are listed (then `chorus stop` and `chorus start`)."""
    from chorus.daemon import DaemonClient, NotRunningError
    from chorus.daemon._checks import load_checked_config
    from chorus.integrity import Guardian

    load_checked_config()  # ConfigError: exit 2, the key named, nothing accepted
    guardian = Guardian()
    for name in ("config.toml", "policy.toml"):
        guardian.accept(name)
    try:
        answer = DaemonClient(autostart=False).call("POST", "/reload")
    except NotRunningError:
        answer = {"daemon": "not running", "applied": [], "restart_needed": []}
    if as_json:
        typer.echo(json.dumps(answer))
        return
    if answer.get("daemon") == "not running":
        typer.echo("no daemon is running: the files are valid and apply when it starts")
        return
    applied, later = answer["applied"], answer["restart_needed"]
    typer.echo("policy.toml reloaded (turns that start from now on use it)")
    typer.echo("applied: " + (", ".join(applied) if applied else "no config change"))
    if later:
        typer.echo(
            "need a restart (`chorus stop` then `chorus start`): " + ", ".join(later), err=True
        )
