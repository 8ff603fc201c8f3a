"""``chorus audit``, ``chorus secret``, ``chorus policy`` (flags: ``_flags_cmd``)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import getpass
import json
import re
import sys
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from chorus.bodies import PermissionAsk
from chorus.cli._app import app
from chorus.policy import (
    PERMISSION_MODES,
    AuditLog,
    PolicyEngine,
    SecretStore,
    Verdict,
    dangerous_flags,
    load_policy,
    policy_path,
    scan_for_leaks,
)

console = Console(soft_wrap=True)  # long paths stay on one line (scripts grep them)

audit_app = typer.Typer(
    help="Show, verify, repair and migrate the audit log (a signed hash chain).",
    invoke_without_command=True,
)
secret_app = typer.Typer(
    help="Store secrets encrypted; bodies get them as env.", no_args_is_help=True
)
policy_app = typer.Typer(help="Show and check policy.toml.", no_args_is_help=True)
app.add_typer(audit_app, name="audit")
app.add_typer(secret_app, name="secret")
app.add_typer(policy_app, name="policy")

_DURATION = re.compile(r"^(\d+(?:\.\d+)?)([smhdw])$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_since(text: str, *, now: float | None = None) -> float:
    """``10m``, ``2h``, ``3d`` ago, or an ISO date/time (local time if no zone) -> Unix time."""
    now = time.time() if now is None else now
    match = _DURATION.match(text.strip())
    if match:
        return now - float(match.group(1)) * _UNITS[match.group(2)]
    try:
        return dt.datetime.fromisoformat(text.strip()).timestamp()
    except ValueError:
        raise typer.BadParameter(f"{text!r}: use 30s, 10m, 2h, 3d, 1w or an ISO date") from None


def _when(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M:%S")


def _summary(data: dict[str, object]) -> str:
    keys = ("decision", "tool", "rule", "reason", "name", "subtype", "flag", "summary")
    parts = [f"{k}={data[k]}" for k in keys if data.get(k) not in (None, "")]
    text = " ".join(parts) or json.dumps(data, ensure_ascii=False)
    return text if len(text) <= 160 else text[:157] + "..."


# -- audit ---------------------------------------------------------------------------


@audit_app.callback()
def audit(
    ctx: typer.Context,
    since: str | None = typer.Option(None, help="Only entries since: 10m, 2h, 3d or a date."),
    kind: str | None = typer.Option(None, help="Only entries of this kind."),
    as_json: bool = typer.Option(False, "--json", help="One JSON entry per line."),
) -> None:
    """List audit entries (oldest first)."""
    if ctx.invoked_subcommand is not None:
        return
    start = parse_since(since) if since else None
    entries = [e for e in AuditLog().entries(since=start) if kind is None or e.kind == kind]
    if as_json:
        for entry in entries:
            typer.echo(json.dumps(entry.to_dict(), ensure_ascii=False))
        return
    table = Table("seq", "time", "kind", "session", "summary")
    for entry in entries:
        table.add_row(
            str(entry.seq),
            _when(entry.ts),
            entry.kind,
            entry.session_id or "-",
            escape(_summary(entry.data)),
        )
    console.print(table)


@audit_app.command("verify")
def audit_verify(
    as_json: bool = typer.Option(False, "--json", help="The result as one JSON object."),
) -> None:
    """Check the hash chain; exit 1 and name the first bad entry if it was tampered with."""
    log = AuditLog()
    result = log.verify()
    if as_json:
        typer.echo(json.dumps({**dataclasses.asdict(result), "path": str(log.path)}))
        raise typer.Exit(0 if result.ok else 1)
    if result.ok:
        console.print(f"ok: {result.entries} entries, chain intact ({log.path})")
        if result.legacy:
            console.print(
                f"the first {result.legacy} were written before signing; "
                "the migration anchor seals them as they were when it ran"
            )
        return
    where = f" (line {result.line})" if result.line else ""
    if result.needs_migration:
        console.print(f"[yellow]UNSIGNED[/yellow]: {escape(result.problem)}")
        raise typer.Exit(1)
    console.print(
        f"[red]TAMPERED[/red]: {escape(result.problem)}{where}; {result.entries} verified before it"
    )
    raise typer.Exit(1)


@audit_app.command("repair")
def audit_repair(
    as_json: bool = typer.Option(False, "--json", help="The result as one JSON object."),
    reanchor: bool = typer.Option(
        False,
        "--reanchor",
        help="Instead: accept a log you replaced on purpose (the store's anchor moves to it; "
        "a signed entry names the anchor it replaced).",
    ),
) -> None:
    """Move a torn last line (a crash mid-write) aside, log that, and let appends go on."""
    log = AuditLog()
    if reanchor:
        _reanchor(log, as_json)
        return
    result = log.repair()
    if as_json:
        moved = str(result.moved_to) if result.moved_to else None
        typer.echo(
            json.dumps({"repaired": result.repaired, "moved_to": moved, "bytes": result.bytes})
        )
        return
    if not result.repaired:
        console.print(f"nothing to repair: the last line of {log.path} is a whole entry")
        return
    console.print(f"moved a torn last line ({result.bytes} bytes) to {result.moved_to}; logged")
    console.print("run `chorus audit verify` to check the rest of the chain")


def _reanchor(log: AuditLog, as_json: bool) -> None:
    """``audit repair --reanchor``: exit 1 if the log fails its own checks (nothing
    written), 2 if there is nothing to do."""
    result = log.reanchor()
    code = {"reanchored": 0, "broken": 1}.get(result.status, 2)
    if as_json:
        typer.echo(json.dumps({**dataclasses.asdict(result), "path": str(log.path)}))
        raise typer.Exit(code)
    if result.status == "reanchored":
        console.print(
            f"anchored at {result.entries} entries (it named {result.replaced} before); "
            "the log records it"
        )
        return
    typer.echo(f"not reanchored: {result.problem}", err=True)
    raise typer.Exit(code)


_MIGRATE_EXIT = {"migrated": 0, "broken": 1}


@audit_app.command("migrate")
def audit_migrate(
    as_json: bool = typer.Option(False, "--json", help="The result as one JSON object."),
) -> None:
    """Seal an audit log written before signing (check its old hash chain, then sign an anchor).

    Exit 1 if the old entries fail their own checks (nothing is written); exit 2 if there
    is no log or nothing to migrate."""
    log = AuditLog()
    result = log.migrate()
    code = _MIGRATE_EXIT.get(result.status, 2)
    if as_json:
        out = {**dataclasses.asdict(result), "migrated": result.migrated, "path": str(log.path)}
        typer.echo(json.dumps(out))
        raise typer.Exit(code)
    if result.migrated:
        console.print(
            f"sealed {result.legacy} unsigned entries with a signed anchor "
            f"(entry {result.anchor_seq}); `chorus audit verify` now checks them against it"
        )
        return
    if result.status == "broken":
        console.print(
            f"[red]not migrated[/red]: {escape(result.problem)}; nothing was written "
            "(keep the file for inspection; moving audit/ aside starts a new log, "
            "which `chorus audit repair --reanchor` then accepts)"
        )
    else:
        typer.echo(f"{result.problem} (nothing written)", err=True)
    raise typer.Exit(code)


# -- secrets ---------------------------------------------------------------------------


def _read_value(value: str | None) -> str:
    if value is not None:
        return value
    if sys.stdin.isatty():
        return getpass.getpass("value: ")
    return sys.stdin.read().rstrip("\r\n")


@secret_app.command("set")
def secret_set(
    name: str = typer.Argument(..., help="Name, also the env var a body gets (e.g. GITHUB_TOKEN)."),
    value: str | None = typer.Option(None, help="The value; read from stdin when omitted."),
    as_json: bool = typer.Option(False, "--json", help="One JSON object."),
) -> None:
    """Store (or replace) a secret, encrypted with AES-256-GCM."""
    store = SecretStore()
    info = store.set(name, _read_value(value))
    AuditLog().append("secret_set", {"name": info.name})
    if as_json:
        typer.echo(json.dumps(dataclasses.asdict(info)))
        return
    console.print(f"stored {info.name} ({store.key_source.description})")


@secret_app.command("list")
def secret_list(as_json: bool = typer.Option(False, "--json", help="One JSON array.")) -> None:
    """List secret names and dates (never values)."""
    entries = SecretStore().entries()
    if as_json:
        typer.echo(json.dumps([dataclasses.asdict(info) for info in entries]))
        return
    table = Table("name", "created", "updated")
    for info in entries:
        table.add_row(info.name, _when(info.created), _when(info.updated))
    console.print(table)


@secret_app.command("rm")
def secret_rm(
    name: str, as_json: bool = typer.Option(False, "--json", help="One JSON object.")
) -> None:
    """Remove a secret."""
    SecretStore().rm(name)
    AuditLog().append("secret_removed", {"name": name})
    if as_json:
        typer.echo(json.dumps({"removed": name}))
        return
    console.print(f"removed {name}")


@secret_app.command("scan")
def secret_scan(as_json: bool = typer.Option(False, "--json", help="One JSON object.")) -> None:
    """Search every file under CHORUS_HOME for secret values; exit 1 on a leak."""
    store = SecretStore()
    leaks = scan_for_leaks(store.items(), store.home)
    if as_json:
        found = [{"name": x.name, "form": x.form, "path": str(x.path)} for x in leaks]
        typer.echo(json.dumps({"leaks": found}))
        raise typer.Exit(1 if leaks else 0)
    for leak in leaks:
        console.print(f"[red]LEAK[/red] {leak.name} ({leak.form}) in {leak.path}")
    if leaks:
        raise typer.Exit(1)
    console.print(f"no secret found in the clear under {store.home}")


# -- policy ------------------------------------------------------------------------------


@policy_app.command("show")
def policy_show(
    as_json: bool = typer.Option(False, "--json", help="The effective policy as JSON."),
) -> None:
    """Show the effective policy (generating the default file on first run)."""
    policy = load_policy()
    if as_json:
        typer.echo(policy.model_dump_json(indent=2))
        return
    console.print(f"file: {policy_path()}")
    console.print(
        f"mode: {policy.mode}   authority: {policy.risk.authority}   "
        f"environment: {policy.risk.environment}"
    )
    fs, shell, net = policy.filesystem, policy.shell, policy.network
    console.print(
        f"filesystem: allowed {fs.allowed_paths}, read-only {fs.read_only_paths}, "
        f"{len(fs.denied_paths)} denied patterns"
    )
    console.print(
        f"shell: {shell.mode}, {len(shell.denied_commands)} denied, "
        f"{len(shell.allowed_commands)} allowed, timeout {shell.timeout_s:g}s"
    )
    console.print(f"network: allowed {net.allowed_domains or 'any'}, denied {net.denied_domains}")
    console.print(
        f"mcp: {policy.mcp.allowed_servers or 'none'}   "
        f"ask: {policy.ask.default} after {policy.ask.timeout_s:g}s"
    )
    table = Table("body", "dangerous flag", "allowed by native_flags.toml", "why")
    for flag in dangerous_flags():
        table.add_row(flag.body, flag.flag, "yes" if flag.allowed else "no", flag.why)
    console.print(table)
    console.print(f"native.allow_dangerous = {str(policy.native.allow_dangerous).lower()}")


@policy_app.command("check")
def policy_check(
    command: str | None = typer.Option(None, help="Decide this shell command."),
    path: str | None = typer.Option(None, help="Decide a file access to this path."),
    write: bool = typer.Option(False, help="With --path: a write, not a read."),
    url: str | None = typer.Option(None, help="Decide a web fetch of this URL."),
    mode: str | None = typer.Option(None, help="Permission mode to decide in."),
    cwd: Annotated[Path | None, typer.Option(help="Working directory (default: here).")] = None,
    as_json: bool = typer.Option(False, "--json", help="The verdicts as JSON."),
) -> None:
    """Validate policy.toml; with --command/--path/--url, show what it decides.

    Exit code: 0 allowed (or asked), 1 if any is denied, 2 bad policy or input."""
    policy = load_policy()
    asks = _asks(command, path, write, url, cwd or Path.cwd())
    if mode is not None and mode not in PERMISSION_MODES:
        raise typer.BadParameter(f"unknown mode {mode!r}; one of {', '.join(PERMISSION_MODES)}")
    engine = PolicyEngine(policy, cwd=cwd)
    verdicts = [(ask, engine.decide(ask, mode=mode)) for ask in asks]
    if as_json:
        rows = [_verdict_json(ask, verdict) for ask, verdict in verdicts]
        typer.echo(json.dumps({"policy": str(policy_path()), "valid": True, "verdicts": rows}))
    else:
        console.print(f"{policy_path()}: valid")
        for ask, verdict in verdicts:
            risk = f" risk={verdict.risk.level}" if verdict.risk else ""
            text = escape(f"[{verdict.rule}]{risk} {verdict.reason}")
            console.print(f"{ask.tool}: [bold]{verdict.decision}[/bold] {text}")
    if any(verdict.decision == "deny" for _ask, verdict in verdicts):
        raise typer.Exit(1)


def _verdict_json(ask: PermissionAsk, verdict: Verdict) -> dict[str, object]:
    return {
        "tool": ask.tool,
        "decision": verdict.decision,
        "rule": verdict.rule,
        "reason": verdict.reason,
        "risk": verdict.risk.level if verdict.risk else None,
    }


def _asks(
    command: str | None, path: str | None, write: bool, url: str | None, cwd: Path
) -> list[PermissionAsk]:
    asks: list[PermissionAsk] = []
    if command is not None:
        asks.append(PermissionAsk("cli", "shell", "Bash", {"command": command}, cwd=str(cwd)))
    if path is not None:
        tool = "write" if write else "read"
        asks.append(PermissionAsk("cli", tool, tool.title(), {"file_path": path}, cwd=str(cwd)))
    if url is not None:
        asks.append(PermissionAsk("cli", "web_fetch", "WebFetch", {"url": url}, cwd=str(cwd)))
    return asks
