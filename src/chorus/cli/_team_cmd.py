"""``chorus team create|list|status|send|run|messages|teardown``.

The team's config is checked here first (bad input exits 2 before any daemon
starts, and writes nothing); the daemon owns the mailboxes and runs the members.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

import typer

from chorus._errors import UserError
from chorus.cli._app import app
from chorus.client import DaemonClient

team_app = typer.Typer(help="Teams: several bodies on one task at once.", no_args_is_help=True)
app.add_typer(team_app, name="team")
_JSON = typer.Option(False, "--json", help="Print JSON.")
_MEMBERS = typer.Option([], "--member", help="NAME=BODY or NAME=BODY:ROLE (repeat for each).")
_ASSIGN = typer.Option([], "--assign", help="MEMBER=TEXT: skip the coordinator's split (repeat).")


def _print(data: Any) -> None:
    typer.echo(json.dumps(data, indent=2))


def _quote(name: str) -> str:
    from urllib.parse import quote

    return quote(name, safe="")


def _known_team(name: str) -> Any:
    from chorus.teams import load_team

    return load_team(name)


@team_app.command()
def create(
    name: str = typer.Argument(..., help="The team's name (a-z, 0-9, '_' or '-')."),
    member: list[str] = _MEMBERS,
    coordinator: str = typer.Option("claude", "--coordinator", help="The coordinator's body."),
    persistent: bool = typer.Option(
        False, "--persistent", help="Keep the team after its task (default: torn down)."
    ),
    as_json: bool = _JSON,
) -> None:
    """Create a team: members (each a session on a body) and a coordinator body."""
    from chorus.bodies import body_names
    from chorus.config import load_config
    from chorus.teams import build, parse_members, team_dir

    team = build(name, parse_members(member), coordinator, persistent)
    known = body_names(load_config())
    for body in {team.coordinator, *(m.body for m in team.members.values())}:
        if body not in known:
            raise UserError(f"unknown body {body!r}; known bodies: {', '.join(known)}")
    if (team_dir(name) / "config.toml").exists():
        raise UserError(f"team {name!r} exists; tear it down first or pick another name")
    members = {k: m.model_dump() for k, m in team.members.items()}
    request = {"name": name, "members": members, "coordinator": coordinator}
    created = DaemonClient().call("POST", "/teams", {**request, "persistent": persistent})
    if as_json:
        _print(created)
        return
    listed = ", ".join(f"{k} ({m['body']})" for k, m in members.items())
    typer.echo(f"team {name}: {listed}; coordinator {coordinator}; folder {created['folder']}")


@team_app.command("list")
def list_cmd(as_json: bool = _JSON) -> None:
    """Every team, with its members' states."""
    from chorus.teams import list_teams

    teams = DaemonClient().call("GET", "/teams") if list_teams() else []
    if as_json:
        _print(teams)
        return
    for team in teams:
        states = ", ".join(f"{m['name']} {m['state']}" for m in team["members"])
        typer.echo(f"{team['name']}: {states}")
    if not teams:
        typer.echo("no teams yet: chorus team create NAME --member NAME=BODY ...")


@team_app.command()
def status(name: str, as_json: bool = _JSON) -> None:
    """A team's members (state, job, messages waiting) and its last run."""
    _known_team(name)
    data = DaemonClient().call("GET", f"/teams/{_quote(name)}")
    if as_json:
        _print(data)
        return
    typer.echo(f"team {name} ({'persistent' if data['persistent'] else 'ephemeral'})")
    for m in data["members"]:
        job = f" job {m['job_id'][:12]}" if m.get("job_id") else ""
        typer.echo(
            f"  {m['name']:<14} {m['body']:<8} {m['state']:<10} "
            f"pending {m['pending']}, delivered {m['delivered']}{job}"
        )
    run = data.get("run")
    if run:
        typer.echo(f"  run {run['id'][:12]}: {run['state']}" + _run_tail(run))


def _run_tail(run: dict[str, Any]) -> str:
    if run.get("error"):
        return f" ({run['error']})"
    return ""


@team_app.command()
def send(
    name: str,
    member: str,
    text: str,
    kind: str = typer.Option("status", "--kind", help="The message kind."),
    as_json: bool = _JSON,
) -> None:
    """Send a message to a member (or the coordinator)."""
    team = _known_team(name)
    team.check_member(member)
    sent = DaemonClient().call(
        "POST", f"/teams/{_quote(name)}/send", {"to": member, "text": text, "kind": kind}
    )
    if as_json:
        _print(sent)
        return
    typer.echo(f"message {sent['id'][:12]} to {member}: {sent['how']}")


def steer_member(team: str | None, member: str | None, text: str, as_json: bool) -> int:
    """``chorus steer --team T --member M TEXT``: a ``steer`` message, into the running
    turn where the body can take it, else at its turn's end."""
    if team is None or member is None:
        raise UserError("give both --team and --member (chorus steer --team T --member M TEXT)")
    _known_team(team).check_member(member)
    if not text.strip():
        raise UserError("the steer text is empty")
    sent = DaemonClient().call(
        "POST", f"/teams/{_quote(team)}/steer", {"member": member, "text": text}
    )
    if as_json:
        typer.echo(json.dumps(sent))
    else:
        typer.echo(f"{team}/{member}: {sent['how']}")
    return 0


def _assignments(pairs: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for pair in pairs:
        member, sep, text = pair.partition("=")
        if not sep or not member or not text.strip():
            raise UserError(f"bad --assign {pair!r}: use MEMBER=TEXT")
        out[member] = text
    return out


@team_app.command()
def run(
    name: str,
    task: str = typer.Argument(..., help="The task for the team."),
    cwd: str | None = typer.Option(None, "--cwd", help="Folder to work in (default: here)."),
    assign: list[str] = _ASSIGN,
    as_json: bool = _JSON,
) -> None:
    """Run a task: the coordinator splits it, members work in parallel, the coordinator
    synthesizes their results. Exit 0 done, 1 failed."""
    team = _known_team(name)
    assigned = _assignments(assign)
    for member in assigned:
        team.check_member(member, coordinator=False)
    folder = os.path.abspath(cwd or os.getcwd())
    if not os.path.isdir(folder):
        raise UserError(f"folder {folder} does not exist")
    client = DaemonClient()
    body = {"task": task, "cwd": folder, "assign": assigned or None}
    started = client.call("POST", f"/teams/{_quote(name)}/run", body)
    final = _follow(client, name, started["id"], quiet=as_json)
    if as_json:
        _print(final)
    elif final.get("state") == "done":
        typer.echo(final.get("result") or "")
    else:
        typer.echo(f"error: the run failed: {final.get('error')}", err=True)
    raise typer.Exit(0 if final.get("state") == "done" else 1)


def _follow(client: DaemonClient, name: str, run_id: str, *, quiet: bool) -> dict[str, Any]:
    """Poll the team until the run ends; print member state changes on stderr."""
    seen: dict[str, str] = {}
    while True:
        run = _current_run(client, name, run_id, seen, quiet)
        if run is not None and run.get("state") in ("done", "failed"):
            return run
        time.sleep(0.5)


def _current_run(
    client: DaemonClient, name: str, run_id: str, seen: dict[str, str], quiet: bool
) -> dict[str, Any] | None:
    from chorus.teams import team_dir

    try:
        data = client.call("GET", f"/teams/{_quote(name)}")
    except UserError:  # an ephemeral team is gone once its run ended: read its last run
        return _last_run(team_dir(name) / "last_run.json", run_id)
    for m in data["members"]:
        if seen.get(m["name"]) != m["state"] and not quiet:
            typer.echo(f"[{name}] {m['name']}: {m['state']}", err=True)
        seen[m["name"]] = m["state"]
    run = data.get("run")
    return run if isinstance(run, dict) and run.get("id") == run_id else None


def _last_run(path: Any, run_id: str) -> dict[str, Any]:
    try:
        run = json.loads(path.read_text())
    except (OSError, ValueError):
        return {"id": run_id, "state": "failed", "error": "the team is gone"}
    return run if isinstance(run, dict) else {"state": "failed", "error": "unreadable"}


@team_app.command()
def messages(
    name: str,
    member: str | None = typer.Argument(None, help="Only this member's inbox."),
    as_json: bool = _JSON,
) -> None:
    """A team's messages, oldest first, with their delivery state."""
    team = _known_team(name)
    if member is not None:
        team.check_member(member)
    path = f"/teams/{_quote(name)}/messages" + (f"?member={_quote(member)}" if member else "")
    rows = DaemonClient().call("GET", path)
    if as_json:
        _print(rows)
        return
    for m in rows:
        text = str(m["body"].get("text", ""))[:70].replace("\n", " ")
        typer.echo(f"{m['sender']} -> {m['recipient']} [{m['kind']}, {m['state']}] {text}")


@team_app.command()
def teardown(
    name: str,
    force: bool = typer.Option(False, "--force", help="Stop members that still run."),
    as_json: bool = _JSON,
) -> None:
    """Tear a team down. Refused while a member runs, unless --force (which stops it:
    shutdown request, deadline, SIGTERM, SIGKILL to its process group)."""
    _known_team(name)
    done = DaemonClient().call("POST", f"/teams/{_quote(name)}/teardown", {"force": force})
    if as_json:
        _print(done)
        return
    stopped = ", ".join(f"{m} ({' -> '.join(s)})" for m, s in done["stopped"].items())
    typer.echo(f"team {name} torn down" + (f"; stopped {stopped}" if stopped else ""))
