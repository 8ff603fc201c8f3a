"""``chorus talk [SESSION]``: hand a session to its agent's own interactive CLI in
this terminal, under the session's policy, and bring what was said there into the
session's log.

The daemon plans the hand-over (``POST /talk/{id}``: the CLI resuming the native
session with the session's permission mode as the CLI's own flags, the policy's
native rules, inside the session's OS sandbox) and, after it, reads the turns the
person had from the CLI's own transcript into the log (``POST /talk/{id}/end``).
The session is paused meanwhile, so no queued job runs on it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from typing import Any

import typer

from chorus._errors import UserError
from chorus.cli._app import app


@app.command()
def talk(
    session_id: str | None = typer.Argument(None, help="Default: the newest session."),
    as_json: bool = typer.Option(
        False, "--json", help="At the end, one JSON line: the exit code and the turns imported."
    ),
) -> None:
    """Hand a session to the agent's own interactive CLI here; Chorus takes it back on exit."""
    from chorus.client import DaemonClient

    if not sys.stdin.isatty():
        raise UserError(
            "talk hands the session to the agent's own interactive CLI: run it in a terminal"
            " (to send a prompt from a script: `chorus ask --session SESSION PROMPT`)"
        )
    client = DaemonClient()
    session = client.session(session_id or _newest(client))
    if not session.get("native_session_id"):
        cli = session.get("body")
        raise UserError(f"session {session['id']} has no native session the {cli} CLI can resume")
    code, imported = _hand_over(client, session["id"])
    if as_json:
        typer.echo(json.dumps({"session_id": session["id"], "exit_code": code, **imported}))
    else:
        typer.echo(
            f"chorus: {imported['turns']} turn(s) from the talk are in the session's log", err=True
        )
    raise typer.Exit(code)


def _newest(client: Any) -> str:
    sessions = client.sessions()
    if not sessions:
        raise UserError("there are no sessions to talk to")
    return str(sessions[0]["id"])


def _hand_over(client: Any, session_id: str) -> tuple[int, dict[str, Any]]:
    """Pause, run the planned CLI in this terminal, import its turns, resume."""
    path = f"/talk/{session_id}"
    client.pause(session_id)
    try:
        plan = client.call("POST", path)
        _tell(plan)
        code = _run(plan)
        imported = client.call("POST", f"{path}/end")
    finally:
        client.resume(session_id)
    return code, {"events": imported["events"], "turns": imported["turns"]}


def _tell(plan: dict[str, Any]) -> None:
    """What the CLI runs under, on stderr before it takes the terminal."""
    where = "inside Chorus's sandbox" if plan["sandboxed"] else plan["sandbox_note"]
    typer.echo(f"chorus: {plan['cli']} in mode {plan['mode']}, {where}", err=True)
    for note in plan["notes"]:
        typer.echo(f"chorus: {note}", err=True)


def _run(plan: dict[str, Any]) -> int:
    """The CLI in this terminal; a Ctrl-C there is the CLI's, never ends the talk
    before its turns are brought in."""
    env = _terminal_env({**os.environ, **plan["env"]})
    # a handler, not SIG_IGN: the CLI (exec resets handlers) still gets its Ctrl-C
    before = signal.signal(signal.SIGINT, _let_the_cli_have_it)
    try:
        return subprocess.call(plan["argv"], cwd=plan["cwd"], env=env)
    except OSError as exc:
        raise UserError(f"cannot start {plan['cli']}: {exc}") from exc
    finally:
        signal.signal(signal.SIGINT, before)


# Markers that make a CLI skip its own interface whatever the terminal (Gemini
# goes headless under CI=true and then exits "No input provided via stdin").
_HEADLESS_MARKERS = ("CI", "GITHUB_ACTIONS")


def _terminal_env(env: dict[str, str]) -> dict[str, str]:
    """``env`` without the CI markers when a person's terminal is here: the talk
    is for the CLI's own interface."""
    if not sys.stdin.isatty():
        return env
    return {k: v for k, v in env.items() if k not in _HEADLESS_MARKERS}


def _let_the_cli_have_it(signum: int, frame: object) -> None:
    """SIGINT while the CLI runs: it is the CLI's to handle."""
