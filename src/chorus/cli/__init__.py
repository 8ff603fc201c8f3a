"""The ``chorus`` command line (typer + rich)."""

from chorus.cli._app import app, main

__all__ = ["app", "main"]
