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


#: The modules that add commands to ``app``, in the order ``--help`` lists them.
MODULES = (
    "_agents_cmd",
    "_cluster_cmd",
    "_daemon_cmd",
    "_demo_cmd",
    "_flags_cmd",
    "_fronts_cmd",
    "_gateway_cmd",
    "_init_cmd",
    "_integrity_cmd",
    "_memory_cmd",
    "_policy_cmd",
    "_reload_cmd",
    "_routine_cmd",
    "_schema_cmd",
    "_service_cmd",
    "_store_cmd",
    "_talk_cmd",
    "_team_cmd",
    "_usage_cmd",
    "_worktree_cmd",
)
#: The module each top-level command comes from (a test checks it against ``app``):
#: a command loads its own module only, not all twenty.
OWNER = {
    "agents": "_agents_cmd",
    **dict.fromkeys(("migrate", "nodes"), "_cluster_cmd"),
    **dict.fromkeys(
        (
            *("ask", "doctor", "interrupt", "jobs", "log", "start"),
            *("status", "steer", "stop", "task", "watch"),
        ),
        "_daemon_cmd",
    ),
    "demo": "_demo_cmd",
    **dict.fromkeys(("approve", "dashboard", "flag", "flags", "reject"), "_flags_cmd"),
    **dict.fromkeys(("acp", "codex-app-server"), "_fronts_cmd"),
    **dict.fromkeys(("connect", "gateway", "repl"), "_gateway_cmd"),
    "init": "_init_cmd",
    "integrity": "_integrity_cmd",
    **dict.fromkeys(("context", "mcp", "memory"), "_memory_cmd"),
    **dict.fromkeys(("audit", "policy", "secret"), "_policy_cmd"),
    "reload": "_reload_cmd",
    **dict.fromkeys(("heartbeat", "routine"), "_routine_cmd"),
    "schema": "_schema_cmd",
    "service": "_service_cmd",
    **dict.fromkeys(("replay", "sessions"), "_store_cmd"),
    "talk": "_talk_cmd",
    "team": "_team_cmd",
    "usage": "_usage_cmd",
    "worktree": "_worktree_cmd",
}


def _register(argv: list[str] | None = None) -> None:
    """Add the commands ``argv`` names (all of them for help, a typo or no argv).

    The module names are literals of this package (``MODULES``), so the import
    graph the layer contracts check is the same as with static imports."""
    from importlib import import_module

    owner = OWNER.get(_command_word(argv or []))
    for name in (owner,) if owner is not None else MODULES:
        import_module(f"chorus.cli.{name}")


def _command_word(argv: list[str]) -> str:
    """The first word that is not an option (``chorus --version`` has none)."""
    return next((word for word in argv if not word.startswith("-")), "")


def run_app() -> None:
    """Run the typer app on ``sys.argv``: Chorus errors become a message and an exit code."""
    _register(sys.argv[1:])
    try:
        app()
    except UserError as exc:
        typer.echo(f"error: {exc}", err=True)
        sys.exit(exc.exit_code)
    except ChorusError as exc:
        typer.echo(f"error: {exc}", err=True)
        sys.exit(1)
