"""Root typer app. Each sub-area registers its commands from its own module."""

from __future__ import annotations

import sys

import typer
from rich.console import Console

from chorus._errors import ChorusError, UserError

app = typer.Typer(
    name="chorus",
    help="One control plane for coding-agent CLIs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
err_console = Console(stderr=True)


def _register() -> None:
    # Imported for their side effect of adding commands to ``app``.
    from chorus.cli import (  # noqa: F401
        _agents_cmd,
        _daemon_cmd,
        _demo_cmd,
        _gateway_cmd,
        _memory_cmd,
        _policy_cmd,
        _schema_cmd,
        _store_cmd,
    )


def main() -> None:
    """Console-script entry point: maps Chorus errors to a message and an exit code."""
    _register()
    try:
        app()
    except UserError as exc:
        err_console.print(f"[red]error:[/red] {exc}")
        sys.exit(exc.exit_code)
    except ChorusError as exc:
        err_console.print(f"[red]error:[/red] {exc}")
        sys.exit(1)
