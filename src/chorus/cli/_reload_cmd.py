"""``chorus reload``: check config.toml and policy.toml, take them as the integrity
guardian's baselines (the person's deliberate edit), and have the running daemon
apply them; it says which settings need a restart."""

from __future__ import annotations

import json
from typing import Any

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
    _say(answer)


def _say(answer: dict[str, Any]) -> None:
    """What the daemon took, for a person."""
    from chorus.daemon._reload import shown_keys

    agents = answer.get("agents", {})
    applied = shown_keys(answer["applied"], agents)
    typer.echo("policy.toml reloaded (turns that start from now on use it)")
    typer.echo("applied: " + (", ".join(applied) if applied else "no config change"))
    for what, names in agents.items():
        if names:
            typer.echo(f"agents {what}: {', '.join(names)}")
    bodies = answer.get("bodies", {})
    if bodies.get("closed") or bodies.get("after_turn"):
        typer.echo(
            f"warm bodies with the old settings: {len(bodies['closed'])} closed,"
            f" {len(bodies['after_turn'])} close after their turn (the next turn starts anew)"
        )
    later = answer["restart_needed"]
    if later:
        typer.echo(
            "need a restart (`chorus stop` then `chorus start`): " + ", ".join(later), err=True
        )
