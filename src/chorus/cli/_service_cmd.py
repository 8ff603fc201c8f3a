"""``chorus service install|uninstall|status``: the daemon as a login service
(a systemd user unit on Linux, a launchd agent on macOS)."""

from __future__ import annotations

import json
from typing import Any

import typer

from chorus._errors import UserError
from chorus.cli._app import app
from chorus.client import (
    KINDS,
    ServiceSpec,
    ServiceToolMissingError,
    disable,
    enable,
    service_spec,
    state,
    unit_text,
)

service_app = typer.Typer(
    help="Run the daemon at login (systemd user unit or launchd agent).", no_args_is_help=True
)
app.add_typer(service_app, name="service")

_KIND = typer.Option(None, "--kind", help="systemd or launchd (default: this OS's).")
_JSON = typer.Option(False, "--json", help="One JSON object.")
_NO_START = typer.Option(False, "--no-start", help="Write the file only; enable nothing.")


def _spec(kind: str | None) -> ServiceSpec:
    if kind is not None and kind not in KINDS:
        raise UserError(f"unknown service kind {kind!r}: use systemd or launchd")
    return service_spec(kind)


def _manual(spec: ServiceSpec) -> str:
    if spec.kind == "systemd":
        return f"systemctl --user enable --now {spec.name}.service"
    return f"launchctl bootstrap gui/$(id -u) {spec.path}"


def _report(data: dict[str, Any], as_json: bool, lines: list[str], code: int = 0) -> None:
    if as_json:
        typer.echo(json.dumps(data))
    else:
        for line in lines:
            typer.echo(line, err=line.startswith("warning"))
    raise typer.Exit(code)


@service_app.command("install")
def install(kind: str | None = _KIND, no_start: bool = _NO_START, as_json: bool = _JSON) -> None:
    """Write the unit for this CHORUS_HOME and start it now and at every login.

    Exit 1 when the file is written but the service manager could not enable it
    (the message says what to run)."""
    spec = _spec(kind)
    spec.path.parent.mkdir(parents=True, exist_ok=True)
    spec.path.write_text(unit_text(spec))
    spec.log.parent.mkdir(parents=True, exist_ok=True, mode=0o700)  # opened before the daemon
    data: dict[str, Any] = {"kind": spec.kind, "name": spec.name, "path": str(spec.path)}
    lines = [f"wrote {spec.path}"]
    if no_start:
        lines.append(f"not enabled (--no-start); to start it: {_manual(spec)}")
        _report({**data, "enabled": False}, as_json, lines)
    try:
        enable(spec)
    except ServiceToolMissingError as exc:
        lines.append(f"warning: not enabled: {exc}; once it is available: {_manual(spec)}")
        _report({**data, "enabled": False, "error": str(exc)}, as_json, lines, 1)
    lines.append(f"enabled: the daemon runs now and at every login ({spec.name})")
    _report({**data, "enabled": True}, as_json, lines)


@service_app.command("uninstall")
def uninstall(kind: str | None = _KIND, as_json: bool = _JSON) -> None:
    """Stop the service, take it out of login and remove its file."""
    spec = _spec(kind)
    data: dict[str, Any] = {"kind": spec.kind, "name": spec.name, "path": str(spec.path)}
    if not spec.path.exists():
        _report({**data, "removed": False}, as_json, [f"no service installed ({spec.path})"])
    lines, error = [], None
    try:
        disable(spec)
    except ServiceToolMissingError as exc:
        error = str(exc)
        lines.append(f"warning: could not disable it: {exc}")
    spec.path.unlink()
    lines.append(f"removed {spec.path}")
    _report({**data, "removed": True, "error": error}, as_json, lines)


@service_app.command("status")
def status(kind: str | None = _KIND, as_json: bool = _JSON) -> None:
    """Whether the unit is installed, and what the service manager says of it."""
    spec = _spec(kind)
    installed = spec.path.exists()
    current = state(spec) if installed else "not installed"
    data = {
        "kind": spec.kind,
        "name": spec.name,
        "path": str(spec.path),
        "installed": installed,
        "state": current,
    }
    lines = [f"{spec.kind} {spec.name}: {current}", f"file: {spec.path}"]
    if not installed:
        lines.append("install it with `chorus service install`")
    _report(data, as_json, lines)
