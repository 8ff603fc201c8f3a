"""``chorus reload``: check config.toml and policy.toml, take them as the integrity
guardian's baselines (the person's deliberate edit), and have the running daemon
apply them; it says which settings need a restart. An edit the guardian put aside
before a reload could take it is named, and ``--take-back`` puts it back first."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import typer

from chorus._errors import UserError
from chorus.cli._app import app

if TYPE_CHECKING:
    from chorus.integrity import Guardian


@app.command("reload")
def reload_cmd(
    as_json: bool = typer.Option(False, "--json", help="One JSON object."),
    take_back: bool = typer.Option(
        False,
        "--take-back",
        help="First put back an edit of config.toml or policy.toml that the integrity"
        " guardian put aside before a reload took it (checked like the files).",
    ),
) -> None:
    """Apply a changed config.toml and policy.toml to the running daemon.

    Bad settings: exit 2 naming the key, nothing applied. Settings that need a
    restart are listed (then `chorus stop` and `chorus start`)."""
    from chorus.integrity import RELOADED, Guardian

    guardian = Guardian()
    taken = _take_back(guardian) if take_back else {}
    waiting = {n: kept for n in RELOADED if (kept := guardian.put_aside(n))}
    answer = send_reload(guardian)
    answer.update(taken_back=taken, put_aside=waiting)
    if as_json:
        typer.echo(json.dumps(answer))
        return
    _say_put_aside(taken, waiting)
    if answer.get("daemon") == "not running":
        typer.echo("no daemon is running: the files are valid and apply when it starts")
        return
    _say(answer)


def send_reload(guardian: Guardian) -> dict[str, Any]:
    """Check config.toml and policy.toml, take both as the guardian's baselines (a
    person's deliberate edit) and have a running daemon apply them."""
    from chorus.client import DaemonClient, NotRunningError, load_checked_config
    from chorus.integrity import RELOADED

    load_checked_config()  # ConfigError: exit 2, the key named, nothing accepted
    for name in RELOADED:
        guardian.accept(name)
    try:
        answer: dict[str, Any] = DaemonClient(autostart=False).call("POST", "/reload")
        return answer
    except NotRunningError:
        return {"daemon": "not running", "applied": [], "restart_needed": []}


def _take_back(guardian: Guardian) -> dict[str, str]:
    """Put back each edit the guardian put aside (a bad one: exit 2, left as it was)."""
    from chorus.client import load_checked_config
    from chorus.integrity import RELOADED

    names = [n for n in RELOADED if guardian.put_aside(n)]
    if not names:
        raise UserError("no edit of config.toml or policy.toml was put aside since its baseline")
    return {name: guardian.take_back(name, load_checked_config) for name in names}


def _say_put_aside(taken: dict[str, str], waiting: dict[str, str]) -> None:
    for name, kept in taken.items():
        typer.echo(f"{name}: your edit is back in place (from {kept})")
    for name, kept in waiting.items():
        typer.echo(
            f"{name}: an edit was put aside by the integrity guardian before a reload took"
            f" it ({kept}); if it is yours: chorus reload --take-back",
            err=True,
        )


def shown_keys(applied: list[str], agents: dict[str, list[str]]) -> list[str]:
    """``applied`` for a person: a whole agent added or removed as ``agents.<name>.*``."""
    whole = {*agents.get("added", []), *agents.get("removed", [])}
    shown: list[str] = []
    for key in applied:
        parts = key.split(".")
        item = f"agents.{parts[1]}.*" if parts[0] == "agents" and parts[1] in whole else key
        if item not in shown:
            shown.append(item)
    return shown


def _say(answer: dict[str, Any]) -> None:
    """What the daemon took, for a person."""
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
