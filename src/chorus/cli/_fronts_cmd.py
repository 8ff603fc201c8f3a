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


@app.command("codex-app-server")
def codex_app_server(
    body: str | None = typer.Option(
        None, "--body", "-b", envvar="CHORUS_BODY", help="Default: the router's choice."
    ),
    listen: str = typer.Option("stdio://", "--listen", help="Only stdio:// is served."),
) -> None:
    """Run Chorus as a Codex app-server on stdio (for the openai-codex SDK)."""
    from chorus._errors import UserError
    from chorus.fronts import CodexArgs, CodexFront, run_front

    if listen != "stdio://":
        raise UserError(f"--listen {listen!r}: only stdio:// is served")
    raise typer.Exit(run_front(CodexFront(CodexArgs(body=body))))
