"""``chorus init``: find each agent CLI and its login, route to the ones that can run.

It looks for every pinned CLI (``chorus agents list``) and its login the way the
CLI finds one (``chorus doctor``; never a secret shown), then sets ``[router]
bodies`` in config.toml to the CLIs that can run (:mod:`chorus.cli._init_edit`:
the rest of the file is kept byte for byte, a person's own list is never changed).
A running daemon takes the change at once (as ``chorus reload``, which also makes
it the integrity guardian's baseline). It prints what is ready and what to do
for the rest. Idempotent: a second run changes nothing and says so.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer

from chorus.agents import Login
from chorus.cli._app import app
from chorus.cli._init_edit import Edit, with_bodies
from chorus.config import ChorusConfig

#: The CLIs ``chorus init`` routes to (each one's body has its name); the ACP
#: adapters run on the same logins and are there with ``--body``.
ROUTED = ("claude", "codex", "gemini")
_INSTALL = "not installed: chorus agents install"
_POLICY = "policy.toml changed since its baseline: look at it, then run chorus reload"


@dataclass(frozen=True, slots=True)
class Found:
    """One agent CLI: where it is (None: not installed) and its login."""

    name: str
    path: str | None
    login: Login

    @property
    def ready(self) -> bool:
        return self.path is not None and self.login.usable

    def state(self) -> str:
        if self.path is None:
            return _INSTALL
        return f"ready: {self.login.describe()}" if self.ready else self.login.describe()

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "path": self.path, "ready": self.ready, "state": self.state()}


def survey(config: ChorusConfig) -> list[Found]:
    """Every pinned agent CLI with the login it would run with here."""
    from chorus.agents import describe_agents, find_login

    found = []
    for info in describe_agents(with_version=False):
        agent = config.agents.get(info.name)
        login = find_login(info.name, agent.env if agent else {})
        found.append(Found(info.name, str(info.path) if info.path else None, login))
    return found


@app.command("init")
def init(as_json: bool = typer.Option(False, "--json", help="One JSON object.")) -> None:
    """Find the agent CLIs and their logins; set [router] bodies in config.toml to
    the ones that can run (a running daemon takes it at once); say what to do for
    the rest. Safe to run again: it changes nothing that is already right."""
    from chorus.client import load_checked_config
    from chorus.config import chorus_home, load_config

    load_checked_config()  # a bad config.toml or policy.toml: exit 2, nothing written
    path = chorus_home() / "config.toml"
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    found = survey(load_config())
    edit = with_bodies(text, [f.name for f in found if f.ready and f.name in ROUTED])
    changed = edit.text != text
    daemon = _apply(path, edit.text) if changed else None
    report = _report(path, found, edit, changed, daemon)
    if as_json:
        typer.echo(json.dumps(report))
        return
    _say(report)


def _apply(path: Path, text: str) -> dict[str, Any]:
    """Write ``text`` in one step, then reload (the guardian's baseline too). A
    policy.toml changed since its baseline is not init's to bless: then only
    config.toml is taken, and the reload left to the person."""
    from chorus.cli._reload_cmd import send_reload
    from chorus.integrity import Guardian

    guardian = Guardian()
    policy_changed = any(s.name == "policy.toml" and not s.ok for s in guardian.status())
    _write(path, text)
    if not policy_changed:
        return send_reload(guardian)
    guardian.accept("config.toml")
    return {"daemon": "not reloaded", "applied": [], "restart_needed": [], "why": _POLICY}


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    mode = path.stat().st_mode & 0o777 if path.exists() else 0o600
    tmp = path.with_name(f".{path.name}.chorus-init")
    tmp.write_text(text, encoding="utf-8")
    tmp.chmod(mode)
    os.replace(tmp, path)


def _report(
    path: Path, found: list[Found], edit: Edit, changed: bool, daemon: dict[str, Any] | None
) -> dict[str, Any]:
    return {
        "config": str(path),
        "changed": changed,
        "router_bodies": edit.bodies,
        "router_bodies_yours": not edit.managed,
        "agents": [f.as_dict() for f in found],
        "todo": _todo(found, edit),
        "daemon": daemon,
        "daemon_needs_login": _daemon_needs_login(edit.bodies or []),
    }


def _todo(found: list[Found], edit: Edit) -> list[str]:
    """What to do for each CLI that cannot run (the ACP adapters share their logins),
    and for a ready one left out of a person's list."""
    todo = [f"{f.name}: {f.state()}" for f in found if not f.ready and f.name in ROUTED]
    if not edit.managed:
        todo += [
            f"{f.name} is ready but not in your [router] bodies: add it there to route to it"
            for f in found
            if f.ready and f.name in ROUTED and f.name not in (edit.bodies or [])
        ]
    return todo


def _daemon_needs_login(bodies: list[str]) -> dict[str, str]:
    """The routed bodies a running daemon finds no login for (its environment is
    the one it was started in, not this shell's)."""
    from chorus.client import DaemonClient, NotRunningError

    try:
        needs = DaemonClient(autostart=False).status().get("needs_login") or {}
    except NotRunningError:
        return {}
    return {b: str(why) for b, why in needs.items() if b in bodies}


def _say(report: dict[str, Any]) -> None:
    """The report, for a person."""
    typer.echo("agent CLIs:")
    for agent in report["agents"]:
        typer.echo(f"  {agent['name']:<16} {agent['state']}")
    typer.echo(f"config: {report['config']}: {_config_line(report)}")
    _say_daemon(report)
    ready = [a["name"] for a in report["agents"] if a["ready"]]
    if not ready:
        typer.echo("nothing can run yet: do one of the above, then run chorus init again")
        return
    typer.echo('try: chorus ask "hello"')


def _config_line(report: dict[str, Any]) -> str:
    bodies = report["router_bodies"]
    shown = f"[router] bodies = {json.dumps(bodies)}" if bodies is not None else "no bodies set"
    if report["changed"]:
        return f"{shown} (written)"
    yours = ", yours, kept as it is" if report["router_bodies_yours"] else ""
    return f"unchanged, already up to date ({shown}{yours})"


def _say_daemon(report: dict[str, Any]) -> None:
    daemon = report["daemon"]
    if daemon is not None:
        typer.echo(_daemon_line(daemon), err=daemon.get("daemon") == "not reloaded")
    for body, why in report["daemon_needs_login"].items():
        typer.echo(
            f"daemon: {body} {why} in the daemon's environment (started elsewhere?):"
            " chorus stop, then chorus start from here",
            err=True,
        )
    for item in report["todo"]:
        typer.echo(f"to do: {item}")


def _daemon_line(daemon: dict[str, Any]) -> str:
    state = daemon.get("daemon")
    if state == "not running":
        return "daemon: not running; the config applies when it starts"
    if state == "not reloaded":
        return f"daemon: not reloaded: {daemon['why']}"
    return "daemon: reloaded (applied: " + ", ".join(daemon["applied"]) + ")"
