"""Front commands: ``chorus acp`` (an ACP agent on stdio) and ``chorus codex-app-server``."""

from __future__ import annotations

import typer

from chorus.cli._app import app


@app.command()
def acp(
    body: str | None = typer.Option(
        None, "--body", "-b", envvar="CHORUS_BODY", help="Default: the router's choice."
    ),
    model: str | None = typer.Option(None, "--model", "-m", help="Default: the body's."),
) -> None:
    """Run Chorus as an ACP agent on stdio (for Zed's agent_servers and other ACP clients)."""
    from chorus.fronts import AcpFront, run_front

    raise typer.Exit(run_front(AcpFront(body=body, model=model)))
