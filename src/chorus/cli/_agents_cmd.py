"""``chorus agents install|list``."""

from __future__ import annotations

import json

import typer
from rich.console import Console
from rich.table import Table

from chorus.agents import AgentInfo, agents_dir, describe_agents, install_agents
from chorus.bodies import BodyInfo, body_catalog
from chorus.cli._app import app

agents_app = typer.Typer(help="Install and list the pinned agent CLIs.", no_args_is_help=True)
app.add_typer(agents_app, name="agents")
console = Console()


@agents_app.command("install")
def install(force: bool = typer.Option(False, help="Reinstall even if present.")) -> None:
    """Install the pinned agent CLIs into the project-local folder (idempotent)."""
    results = install_agents(force=force)
    for agent, now in results:
        state = "installed" if now else "already present"
        console.print(f"{agent.name:7} {agent.spec:40} {state}")
    console.print(f"folder: {agents_dir()}")


def agent_json(info: AgentInfo) -> dict[str, object]:
    return {
        "name": info.name,
        "found": info.path is not None,
        "version": info.version,
        "pinned": info.pinned,
        "source": info.source,
        "path": str(info.path) if info.path else None,
    }


def bodies_table(bodies: list[BodyInfo]) -> Table:
    table = Table("body", "kind", "program", "found", "native", "emulated")
    for body in bodies:
        caps = body.capabilities.as_dict()
        native = [name for name, support in caps.items() if support == "native"]
        emulated = [name for name, support in caps.items() if support == "emulated"]
        found = "yes" if body.installed else f"[red]no[/red]: {body.problem}"
        table.add_row(
            body.name, body.kind, body.program, found, ", ".join(native), ", ".join(emulated) or "-"
        )
    return table


@agents_app.command("list")
def list_agents(
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Show each agent CLI (found or not, version, path) and each body's capabilities.

    Capabilities: native / emulated / unsupported per control; config-defined ACP
    agents included."""
    agents = describe_agents()
    bodies = body_catalog()
    if as_json:
        payload = {
            "agents": [agent_json(info) for info in agents],
            "bodies": [body.as_dict() for body in bodies],
        }
        typer.echo(json.dumps(payload, indent=2))
        return
    table = Table("agent", "found", "version", "pinned", "source", "path")
    for info in agents:
        table.add_row(
            info.name,
            "yes" if info.path else "[red]no[/red]",
            info.version or "-",
            info.pinned or "-",
            info.source,
            str(info.path) if info.path else "-",
        )
    console.print(table)
    console.print(bodies_table(bodies))
    for body in bodies:
        for limit in body.limits:
            console.print(f"{body.name}: {limit}", highlight=False, markup=False)
