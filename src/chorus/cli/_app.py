"""Root typer app. Each sub-area registers its commands from its own module."""

from __future__ import annotations

import sys

import typer

from chorus._errors import ChorusError, UserError

app = typer.Typer(
    name="chorus",
    help="One control plane for coding-agent CLIs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        from chorus import __version__

        typer.echo(f"chorus {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """One control plane for coding-agent CLIs."""


def _register() -> None:
    # Imported for their side effect of adding commands to ``app``.
    from chorus.cli import (  # noqa: F401
        _agents_cmd,
        _cluster_cmd,
        _daemon_cmd,
        _demo_cmd,
        _flags_cmd,
        _fronts_cmd,
        _gateway_cmd,
        _init_cmd,
        _integrity_cmd,
        _memory_cmd,
        _policy_cmd,
        _reload_cmd,
        _routine_cmd,
        _schema_cmd,
        _service_cmd,
        _store_cmd,
        _talk_cmd,
        _team_cmd,
        _usage_cmd,
        _worktree_cmd,
    )


def run_app() -> None:
    """Run the typer app on ``sys.argv``: Chorus errors become a message and an exit code."""
    _register()
    try:
        app()
    except UserError as exc:
        typer.echo(f"error: {exc}", err=True)
        sys.exit(exc.exit_code)
    except ChorusError as exc:
        typer.echo(f"error: {exc}", err=True)
        sys.exit(1)
