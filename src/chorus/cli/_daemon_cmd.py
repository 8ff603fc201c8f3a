"""Everyday commands on the daemon, as typer commands: start/stop/status, ask, task,
steer, jobs, watch, log, interrupt, doctor (talk: ``_talk_cmd``).

The job commands are implemented in ``_jobs`` (shared with the fast argv path);
the daemon validates their input (an unknown body, a missing CLI, a missing
folder: 400, exit 2, nothing written).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console
from rich.table import Table

from chorus.cli import _jobs
from chorus.cli._app import app
from chorus.cli._everyday import register_everyday
from chorus.cli._fast import HELP

if TYPE_CHECKING:
    from chorus.config import ChorusConfig

console = Console()


_JSON = typer.Option(False, "--json", help=HELP["as_json"])

# ask, task, steer, jobs, watch, status: built from the command table of ``_fast``.
register_everyday(app)


@app.command("log")
def log_cmd(job_id: str, as_json: bool = typer.Option(False, "--json")) -> None:
    """Print a job's events so far, without following (never starts a daemon); given a
    session, the whole session's: job by job and the turns had in `chorus talk`."""
    from chorus.cli._log import is_session, print_session
    from chorus.client import DaemonClient, NotRunningError

    if is_session(job_id):
        print_session(job_id, as_json)
        return
    printer = _jobs.Printer("json" if as_json else "events")
    try:
        lines = list(DaemonClient(autostart=False).event_lines(job_id, follow=False))
    except NotRunningError:
        lines = stored_event_lines(job_id)
    for line in lines:
        printer.feed(line)
    printer.finish()


@app.command()
def interrupt(job_id: str, as_json: bool = typer.Option(False, "--json")) -> None:
    """Interrupt a running job (or cancel a queued one)."""
    from chorus.client import DaemonClient

    answer = DaemonClient().interrupt(job_id)
    typer.echo(json.dumps(answer) if as_json else answer["result"])


@app.command()
def stop(
    cancel_jobs: bool = typer.Option(
        False, "--cancel-jobs", help="Cancel running and queued jobs instead of keeping them."
    ),
    keep_bodies: bool = typer.Option(
        False,
        "--keep-bodies",
        help="Leave the agent CLIs running (e.g. to upgrade Chorus); the next start "
        "re-attaches to them and running turns carry on.",
    ),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Stop the daemon; says which jobs are left (they resume at the next start).

    With --cancel-jobs, running and queued jobs are cancelled first. Agent CLIs that
    a daemon left running (killed, or stopped with --keep-bodies) are ended too,
    unless --keep-bodies is given."""
    from chorus.client import end_bodies_left, stop_daemon
    from chorus.session import keep_flag

    left, cancelled = _jobs_left(cancel_jobs)
    if keep_bodies:
        keep_flag().touch()
    stopped = stop_daemon()
    if not stopped:
        keep_flag().unlink(missing_ok=True)  # nothing to keep: no daemon ran
    ended = 0 if keep_bodies else end_bodies_left()
    if as_json:
        out = {"stopped": stopped, "left": left, "cancelled": cancelled, "ended_bodies": ended}
        typer.echo(json.dumps({**out, "kept_bodies": keep_bodies and stopped}))
        return
    typer.echo("daemon stopped" if stopped else "no daemon was running")
    if keep_bodies and stopped:
        typer.echo("agent CLIs left running; the next start re-attaches to them")
    if ended:
        typer.echo(f"ended {ended} agent CLI(s) a daemon had left running")
    if cancelled:
        typer.echo(f"cancelled {len(cancelled)} job(s): {' '.join(i[:12] for i in cancelled)}")
    if left:
        typer.echo(
            f"{len(left)} job(s) left unfinished, they resume at the next start"
            f" (`chorus start`; or `chorus stop --cancel-jobs`): {' '.join(i[:12] for i in left)}"
        )


def _jobs_left(cancel: bool) -> tuple[list[str], list[str]]:
    """Ids of the running and queued jobs; with ``cancel``, (still open, cancelled)."""
    from chorus.client import DaemonClient, NotRunningError

    client = DaemonClient(autostart=False)
    try:
        open_jobs = [j["id"] for j in client.jobs() if j["state"] in ("running", "queued")]
    except NotRunningError:
        return [], []
    if not cancel:
        return open_jobs, []
    left, deadline = open_jobs, time.monotonic() + 30
    while left and time.monotonic() < deadline:
        for job_id in left:  # again while a job is between states (starting, resuming)
            client.interrupt(job_id)
        time.sleep(0.5)
        left = _open_jobs(client, left)
    cancelled = [j for j in open_jobs if client.job(j)["state"] == "cancelled"]
    return left, cancelled


def _open_jobs(client: Any, ids: list[str]) -> list[str]:
    return [j for j in ids if client.job(j)["state"] in ("running", "queued")]


def _client() -> Any:
    from chorus.client import DaemonClient

    return DaemonClient()


def stored_event_lines(job_id: str) -> list[str]:
    """A job's events as JSON lines, read from the store (no daemon)."""
    from chorus.cli._offline import stored_events

    return stored_events(job_id)


@app.command()
def doctor(as_json: bool = typer.Option(False, "--json", help="One JSON object.")) -> None:
    """Show the agent CLIs found, their versions, auth hints, and config validity."""
    from chorus.agents import describe_agents
    from chorus.bodies import body_catalog
    from chorus.cli._agents_cmd import agent_json, bodies_table
    from chorus.client import load_checked_config

    config = load_checked_config()  # a bad config or policy: ConfigError, exit 2, key named
    rows = [{**agent_json(info), **_auth(info.name, config)} for info in describe_agents()]
    bodies = body_catalog()
    sandbox = _sandbox_line(config.sandbox.mode)
    if as_json:
        payload = {"config": "ok", "agents": rows, "bodies": [b.as_dict() for b in bodies]}
        payload["sandbox"] = sandbox
        typer.echo(json.dumps(payload))
        return
    table = Table("agent", "version", "path", "auth")
    for row in rows:
        auth = str(row["auth"])
        auth = f"[yellow]{auth}[/yellow]" if auth.startswith("needs login") else auth
        table.add_row(
            str(row["name"]),
            str(row["version"] or "[red]missing[/red]"),
            str(row["path"] or "-"),
            auth,
        )
    console.print(table)
    console.print(bodies_table(bodies))
    console.print(f"sandbox: {sandbox}")
    console.print("config: ok")


def _sandbox_line(mode: str) -> str:
    """Whether bodies run in bubblewrap or sandbox-exec (the CLIs' own sandbox notes
    are not shown)."""
    from chorus.sandbox import tool_path

    found = tool_path()
    if mode == "off":
        return 'off ([sandbox] mode = "off")'
    if found is None:
        refuse = "bodies are refused" if mode == "enforce" else "bodies run unsandboxed"
        return f"no sandbox tool: {refuse} ({_SANDBOX_HINT.get(sys.platform, _NO_SANDBOX)})"
    name = "bubblewrap" if Path(found).name == "bwrap" else "sandbox-exec"
    return f"{name} {found} (mode {mode})"


_SANDBOX_HINT = {"linux": "install the bubblewrap package", "darwin": "sandbox-exec is missing"}
_NO_SANDBOX = "only Linux and macOS have one"


def _auth(name: str, config: ChorusConfig) -> dict[str, Any]:
    """The login the agent would run with (``[agents.*.env]`` included), never a secret."""
    from chorus.agents import find_login

    agent = config.agents.get(name)
    login = find_login(name, agent.env if agent else {})
    return {"auth": login.describe(), "login": login.as_dict()}
