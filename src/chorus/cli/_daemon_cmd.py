"""Everyday commands on the daemon: start/stop/status, ask, task, jobs, watch, log,
interrupt, talk, doctor.

Input is validated here, before the daemon is touched, so bad input (an unknown
body, a bad config, a missing CLI, a missing folder) exits 2 and writes nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from chorus._errors import UserError
from chorus.cli._app import app
from chorus.cli._render import print_event
from chorus.events import Event, JobEnded, event_to_json

console = Console()

EXIT_OK, EXIT_FAILED, EXIT_CANCELLED = 0, 1, 3


def _validate(prompt: str, body: str | None, cwd: str | None, *, new_session: bool) -> str | None:
    """Check the config and the prompt's size, then (for a new session) the body name,
    its CLI and the folder; return the cwd of a new session."""
    from chorus.bodies import check_installed
    from chorus.config import load_config
    from chorus.daemon import prompt_problem

    config = load_config()
    problem = prompt_problem(prompt, config.daemon.max_prompt_bytes)
    if problem is not None:
        raise UserError(problem)
    if not new_session:
        return None
    if body is not None:
        check_installed(body, config)
    folder = Path(cwd or os.getcwd()).expanduser().resolve()
    if not folder.is_dir():
        raise UserError(f"working directory {folder} does not exist")
    return str(folder)


def _client() -> Any:
    from chorus.daemon import DaemonClient

    return DaemonClient()


def _stream(job_id: str, *, as_json: bool, from_seq: int = 1) -> JobEnded | None:
    ended: JobEnded | None = None
    for event in _client().events(job_id, from_seq=from_seq):
        _show(event, as_json)
        if isinstance(event, JobEnded):
            ended = event
    return ended


def _show(event: Event, as_json: bool) -> None:
    if as_json:
        typer.echo(event_to_json(event))
    else:
        print_event(console, event)


def _exit_code(ended: JobEnded | None) -> int:
    if ended is None:
        return EXIT_FAILED
    return {"succeeded": EXIT_OK, "cancelled": EXIT_CANCELLED}.get(ended.state, EXIT_FAILED)


def _submit(
    prompt: str,
    body: str | None,
    model: str | None,
    cwd: str | None,
    session: str | None,
    mode: str | None,
) -> dict[str, Any]:
    folder = _validate(prompt, body, cwd, new_session=session is None)
    request = {
        "prompt": prompt,
        "body": body,
        "model": model,
        "cwd": folder,
        "session_id": session,
        "permission_mode": mode,
    }
    job: dict[str, Any] = _client().submit(**request)
    return job


_BODY = typer.Option(None, "--body", "-b", help="claude, codex, gemini, ... (default: routed)")
_MODEL = typer.Option(None, "--model", "-m", help="Model for the body.")
_CWD = typer.Option(None, "--cwd", help="Working directory (default: here).")
_SESSION = typer.Option(None, "--session", "-s", help="Continue this Chorus session.")
_MODE = typer.Option(
    None,
    "--permission-mode",
    help="default|acceptEdits|plan|bypassPermissions (default: the policy's mode)",
)


@app.command()
def ask(
    prompt: str,
    body: str | None = _BODY,
    model: str | None = _MODEL,
    cwd: str | None = _CWD,
    session: str | None = _SESSION,
    mode: str | None = _MODE,
    as_json: bool = typer.Option(False, "--json", help="Print events as JSON lines."),
) -> None:
    """Run a job and stream its events until it ends. Ctrl-C interrupts the job.

    Exit code: 0 succeeded, 1 failed, 3 cancelled or interrupted, 2 bad input."""
    job = _submit(prompt, body, model, cwd, session, mode)
    try:
        ended = _stream(job["id"], as_json=as_json)
    except KeyboardInterrupt:
        _client().interrupt(job["id"])
        ended = _stream(job["id"], as_json=as_json)
    raise typer.Exit(_exit_code(ended))


@app.command()
def task(
    prompt: str,
    body: str | None = _BODY,
    model: str | None = _MODEL,
    cwd: str | None = _CWD,
    session: str | None = _SESSION,
    mode: str | None = _MODE,
) -> None:
    """Queue a job and print its id at once (fire and forget)."""
    job = _submit(prompt, body, model, cwd, session, mode)
    typer.echo(job["id"])


@app.command()
def jobs(state: str | None = typer.Option(None, help="Only jobs in this state.")) -> None:
    """List jobs, oldest first."""
    table = Table("job", "state", "body", "session", "attempts", "prompt")
    for job in _client().jobs(state):
        table.add_row(
            job["id"],
            job["state"],
            job["body"] or "-",
            job["session_id"] or "-",
            str(job["attempts"]),
            job["prompt"][:50],
        )
    console.print(table)


@app.command()
def watch(job_id: str | None = typer.Argument(None, help="Default: the newest job.")) -> None:
    """Follow a job's events. Ctrl-C detaches; the job goes on."""
    client = _client()
    if job_id is None:
        all_jobs = client.jobs()
        if not all_jobs:
            raise UserError("there are no jobs to watch")
        running = [j for j in all_jobs if j["state"] in ("running", "queued")]
        job_id = (running or all_jobs)[-1]["id"]
    try:
        ended = _stream(job_id, as_json=False)
    except KeyboardInterrupt:
        console.print(f"[dim]detached from {job_id}; it goes on[/dim]")
        raise typer.Exit(0) from None
    raise typer.Exit(_exit_code(ended))


@app.command("log")
def log_cmd(job_id: str, as_json: bool = typer.Option(False, "--json")) -> None:
    """Print a job's events so far, without following."""
    for event in _client().events(job_id, follow=False):
        _show(event, as_json)


@app.command()
def interrupt(job_id: str) -> None:
    """Interrupt a running job (or cancel a queued one)."""
    typer.echo(_client().interrupt(job_id)["result"])


@app.command()
def start(as_json: bool = typer.Option(False, "--json", help="Print the result as JSON.")) -> None:
    """Start the daemon for this CHORUS_HOME (it also starts by itself on first use).

    Says so when the daemon runs but its TCP gateway could not start (e.g. the port
    is taken): the unix socket works, remote brains cannot connect."""
    from chorus.daemon import spawn_daemon

    pid = spawn_daemon()
    gateway = _gateway_status()
    if as_json:
        typer.echo(json.dumps({"pid": pid, "gateway_tcp": gateway.get("tcp"),
                               "gateway_tcp_error": gateway.get("tcp_error")}))  # fmt: skip
        return
    typer.echo(f"daemon running (pid {pid})")
    if gateway.get("tcp_error"):
        err = Console(stderr=True)
        err.print(f"[yellow]warning:[/yellow] the TCP gateway is off: {gateway['tcp_error']}")
        err.print("change [gateway] port in config.toml (or set tcp = false), then chorus stop")


def _gateway_status() -> dict[str, Any]:
    """The daemon's ``/gateway/status`` (empty if it cannot be read)."""
    import httpx

    from chorus.daemon._paths import socket_path

    transport = httpx.HTTPTransport(uds=str(socket_path()))
    try:
        with httpx.Client(transport=transport, base_url="http://chorus", timeout=10) as http:
            data = http.get("/gateway/status").json()
    except (httpx.HTTPError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


@app.command()
def stop() -> None:
    """Stop the daemon; running jobs resume at the next start."""
    from chorus.daemon import stop_daemon

    typer.echo("daemon stopped" if stop_daemon() else "no daemon was running")


@app.command()
def status(as_json: bool = typer.Option(False, "--json")) -> None:
    """Daemon state, job counts and provider health."""
    from chorus.daemon import DaemonClient, is_responding

    if not is_responding():
        typer.echo("daemon: not running")
        raise typer.Exit(0)
    data = DaemonClient(autostart=False).status()
    if as_json:
        typer.echo(json.dumps(data, indent=2))
        return
    console.print(f"daemon: running (pid {data['pid']})")
    console.print(f"jobs: {data.get('jobs', {})}")
    now = time.time()
    for row in data.get("health", []):
        left = row["cooldown_until"] - now
        cooling = f", cooling down {left:.0f}s more" if left > 0 else ""
        rate = sum(row["outcomes"]) / len(row["outcomes"]) if row["outcomes"] else 1.0
        console.print(
            f"{row['key']}: {row['quota_state']}, success {rate:.0%}"
            f" of last {len(row['outcomes'])}{cooling}"
        )


_TALK_ARGS = {
    "claude": ["--resume"],
    "codex": ["resume"],
    "gemini": ["--resume"],
}


@app.command()
def talk(
    session_id: str | None = typer.Argument(None, help="Default: the newest session."),
) -> None:
    """Hand a session to the agent's own interactive CLI here; Chorus takes it back on exit."""
    from chorus.agents import find_agent
    from chorus.bodies import CLI_OF
    from chorus.config import load_config

    client = _client()
    if session_id is None:
        sessions = client.sessions()
        if not sessions:
            raise UserError("there are no sessions to talk to")
        session_id = sessions[0]["id"]
    session = client.session(session_id)
    cli = CLI_OF.get(session["body"], session["body"])
    if cli not in _TALK_ARGS or not session["native_session_id"]:
        raise UserError(f"session {session_id} has no native session the {cli} CLI can resume")
    agent = load_config().agents.get(cli)
    env = {**os.environ, **(agent.env if agent else {})}
    argv = [str(find_agent(cli)), *_TALK_ARGS[cli], session["native_session_id"]]
    client.pause(session_id)
    try:
        code = subprocess.call(argv, cwd=session["cwd"], env=env)
    finally:
        client.resume(session_id)
    raise typer.Exit(code)


_AUTH_HINTS = {
    "claude": ("ANTHROPIC_API_KEY", ".claude/.credentials.json", "run `claude` once and log in"),
    "codex": ("OPENAI_API_KEY", ".codex/auth.json", "run `codex login`"),
    "gemini": ("GEMINI_API_KEY", ".gemini/oauth_creds.json", "run `gemini` once and log in"),
}


@app.command()
def doctor() -> None:
    """Show the agent CLIs found, their versions, auth hints, and config validity."""
    from chorus.agents import describe_agents
    from chorus.config import load_config

    load_config()  # a bad config raises ConfigError → exit 2 with the reason
    table = Table("agent", "version", "path", "auth")
    for info in describe_agents():
        cli = info.name.removesuffix("-acp").split("-")[0]  # claude-code-acp → claude
        var, file, hint = _AUTH_HINTS.get(cli, ("", "", ""))
        if not var:
            auth = "-"
        elif os.environ.get(var):
            auth = f"{var} set"
        elif (Path.home() / file).exists():
            auth = f"~/{file} found"
        else:
            auth = f"[yellow]none: set {var} or {hint}[/yellow]"
        table.add_row(info.name, info.version or "[red]missing[/red]", str(info.path or "-"), auth)
    console.print(table)
    console.print("config: ok")
