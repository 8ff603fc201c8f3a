"""Gateway commands: ``chorus connect`` (Chorus dials a brain), ``chorus repl`` (a
terminal brain), ``chorus gateway status|token``.

All of them talk to the daemon (started on first use) over its unix socket:
the daemon owns the sessions, the TCP listener and the brain link.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import typer
from rich.console import Console

from chorus._errors import ChorusError, UserError
from chorus.cli._app import app
from chorus.cli._render import print_event

console = Console()
gateway_app = typer.Typer(help="The UCP v1 gateway for remote brains.", no_args_is_help=True)
app.add_typer(gateway_app, name="gateway")

EXIT_OK, EXIT_FAILED = 0, 1


def _socket() -> Path:
    """The daemon's socket, after making sure a daemon answers on it."""
    from chorus.client import socket_path, spawn_daemon

    spawn_daemon()
    return socket_path()


class DaemonBrain:
    """:class:`chorus.gateway._repl.BrainControl` over the daemon's ``/gateway/brain``."""

    def __init__(self, socket: Path) -> None:
        self._socket = socket

    async def _call(self, method: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        import httpx

        transport = httpx.AsyncHTTPTransport(uds=str(self._socket))
        async with httpx.AsyncClient(transport=transport, base_url="http://chorus") as http:
            try:
                resp = await http.request(method, "/gateway/brain", json=body, timeout=30)
            except httpx.HTTPError as exc:
                raise ChorusError(f"daemon request failed: {exc}") from exc
        data: dict[str, Any] = resp.json()
        if resp.status_code >= 400:
            error = str(data.get("error", resp.text))
            raise UserError(error) if resp.status_code < 500 else ChorusError(error)
        return data

    async def connect(self, url: str) -> dict[str, Any]:
        return await self._call("POST", {"url": url})

    async def disconnect(self) -> dict[str, Any]:
        return await self._call("DELETE")

    async def status(self) -> dict[str, Any]:
        return await self._call("GET")


# -- chorus connect ------------------------------------------------------------------------


@app.command()
def connect(
    brain_url: str | None = typer.Option(
        None, "--brain-url", help="wss://... (default: [brain] url in config.toml)"
    ),
    wait: float = typer.Option(15.0, help="Seconds to wait for the link to come up."),
    disconnect: bool = typer.Option(False, "--disconnect", help="Hang up the brain link."),
    status: bool = typer.Option(False, "--status", help="Show the brain link and exit."),
) -> None:
    """Make Chorus dial a brain and serve UCP v1 on the link (the daemon keeps it up)."""
    brain = DaemonBrain(_socket())
    if status or disconnect:
        result = asyncio.run(brain.disconnect() if disconnect else brain.status())
        typer.echo(json.dumps(result, indent=2))
        return
    url = brain_url or _configured_brain_url()
    asyncio.run(brain.connect(url))
    final = asyncio.run(_wait_for_link(brain, wait))
    typer.echo(json.dumps(final, indent=2))
    raise typer.Exit(EXIT_OK if final.get("state") == "connected" else EXIT_FAILED)


def _configured_brain_url() -> str:
    from chorus.gateway import load_gateway_settings

    url = load_gateway_settings().brain.url
    if url is None:
        raise UserError("give --brain-url, or set [brain] url in config.toml")
    return url


async def _wait_for_link(brain: DaemonBrain, seconds: float) -> dict[str, Any]:
    deadline = time.monotonic() + seconds
    while True:
        state = await brain.status()
        settled = state.get("state") in ("connected", "failed", "closed", "stopped")
        if settled or time.monotonic() >= deadline:
            return state
        await asyncio.sleep(0.2)


# -- chorus gateway ------------------------------------------------------------------------


@gateway_app.command("status")
def gateway_status(
    as_json: bool = typer.Option(False, "--json", help="The same JSON (it always is)."),
) -> None:
    """Sessions, connections, the TCP listener and the brain link, as JSON."""
    import httpx

    transport = httpx.HTTPTransport(uds=str(_socket()))
    with httpx.Client(transport=transport, base_url="http://chorus", timeout=10) as http:
        typer.echo(json.dumps(http.get("/gateway/status").json(), indent=2))


@gateway_app.command("token")
def gateway_token_cmd(
    as_json: bool = typer.Option(False, "--json", help='{"token": ...}'),
) -> None:
    """Print the bearer token TCP clients must send (creating it on first use)."""
    from chorus.gateway import gateway_token, load_gateway_settings

    token = gateway_token(load_gateway_settings().gateway)
    typer.echo(json.dumps({"token": token}) if as_json else token)


# -- chorus repl ---------------------------------------------------------------------------


@app.command()
def repl(
    body: str | None = typer.Option(None, "--body", "-b", help="Default: [gateway] default_body."),
    model: str | None = typer.Option(None, "--model", "-m"),
    cwd: str | None = typer.Option(None, "--cwd", help="Default: the current folder."),
    mode: str | None = typer.Option(
        None, "--permission-mode", "--mode", help="Permission mode (as `ask --permission-mode`)."
    ),
    resume: str | None = typer.Option(None, "--resume", help="A Chorus session id."),
    url: str | None = typer.Option(
        None, "--url", help="A gateway's ws(s):// URL (not the daemon)."
    ),
    token: str | None = typer.Option(None, "--token", envvar="CHORUS_GATEWAY_TOKEN"),
) -> None:
    """An interactive session on a body, over the gateway (type :help)."""
    folder = str(Path(cwd or os.getcwd()).expanduser().resolve())
    fields = {"body": body, "model": model, "cwd": folder, "permission_mode": mode}
    if resume is not None:
        fields = {"resume": resume}
    if url is not None and not token:
        raise UserError(
            f"the gateway at {url} needs its token: pass --token or set CHORUS_GATEWAY_TOKEN"
            " (on the gateway's machine, `chorus gateway token` prints it)"
        )
    try:
        asyncio.run(_repl(url, token, {k: v for k, v in fields.items() if v is not None}))
    except OSError as exc:
        raise ChorusError(f"cannot reach the gateway at {url or 'the daemon'}: {exc}") from exc


async def _repl(url: str | None, token: str | None, init: dict[str, Any]) -> None:
    from chorus.flags import repl_answerer
    from chorus.gateway import UcpClient
    from chorus.gateway._repl import Repl

    if url is not None:
        opener, brain = UcpClient.connect(url, token=token), None
    else:
        socket = _socket()
        opener, brain = UcpClient.connect(unix_socket=socket), DaemonBrain(socket)
    async with opener as client:
        info = await client.request("initialize", timeout=120, **init)
        console.print(
            f"[bold]session {info['session_id']}[/bold] on {info['body']} "
            f"(model {info['model']}); :help for commands, :quit to leave"
        )
        flags = None if url is not None else repl_answerer(info["session_id"])
        shell = Repl(client, brain, _say, flags)
        await shell.run(_stdin_lines(), lambda event: print_event(console, event))


def _say(text: str) -> None:
    console.print(text, highlight=False)


async def _stdin_lines() -> AsyncIterator[str]:
    """Lines from stdin without blocking the loop (a pipe or a terminal; a regular file
    is read directly, since reading it never blocks for long)."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    try:
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    except ValueError:  # a regular file: epoll cannot watch it
        for line in sys.stdin:
            yield line
        return
    while line := (await reader.readline()).decode("utf-8", "replace"):
        yield line
