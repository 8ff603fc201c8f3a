"""``chorus demo``: the whole pipeline, offline, in a throwaway CHORUS_HOME.

It starts Chorus's scripted model server on 127.0.0.1, points a real agent CLI
at it, starts a daemon for a temporary CHORUS_HOME, asks the body to create a
file in a temporary folder, prints the normalized events as they stream, checks
the file, and stops the daemon. Nothing touches your real CHORUS_HOME or the
network.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import typer
from rich.console import Console

from chorus._errors import UserError
from chorus.cli._app import app
from chorus.cli._render import print_event
from chorus.events import JobEnded

console = Console()
_CLI_OF_BODY = {"claude": "claude", "codex": "codex", "gemini": "gemini"}


def _config_toml(cli: str, env: dict[str, str]) -> str:
    lines = ["[daemon]", "notifications = false", f"[agents.{cli}.env]"]
    lines += [f"{key} = {json.dumps(value)}" for key, value in env.items()]
    return "\n".join(lines) + "\n"


@app.command()
def demo(
    body: str = typer.Option("claude", "--body", "-b", help="claude, codex or gemini"),
) -> None:
    """Run a real agent CLI offline on a small task and print the normalized events."""
    from chorus.agents import find_agent
    from chorus.client import DaemonClient, stop_daemon
    from chorus.testing import ModelServer, offline_env, shell, text

    if body not in _CLI_OF_BODY:
        raise UserError(f"the demo runs claude, codex or gemini, not {body!r}")
    find_agent(body)
    with tempfile.TemporaryDirectory(prefix="chorus-demo-") as tmp, ModelServer() as server:
        root = Path(tmp)
        work, home = root / "work", root / "chorus-home"
        work.mkdir()
        home.mkdir()
        server.script([shell("echo 'hello from chorus' > hello.txt"), text("I created hello.txt.")])
        env = offline_env(body, root / f"{body}-home", server.url)  # type: ignore[arg-type]
        (home / "config.toml").write_text(_config_toml(body, env))
        os.environ["CHORUS_HOME"] = str(home)
        console.print(f"[bold]Chorus demo[/bold]: {body} in {work}, scripted model at {server.url}")
        try:
            client = DaemonClient()
            job = client.submit(prompt="Create hello.txt", body=body, cwd=str(work))
            ended = None
            for event in client.events(job["id"]):
                print_event(console, event)
                ended = event if isinstance(event, JobEnded) else ended
        finally:
            stop_daemon()
        made = work / "hello.txt"
        content = made.read_text().strip() if made.exists() else None
        console.print(f"hello.txt on disk: {content!r}")
        ok = ended is not None and ended.state == "succeeded" and content == "hello from chorus"
    raise typer.Exit(0 if ok else 1)
