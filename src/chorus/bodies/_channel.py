"""A body's channel to Chorus: the URL of Chorus's MCP server for one session.

The daemon serves Chorus's MCP tools over streamable HTTP on a loopback port
(``chorus.mcpserver``). A body reaches them only at its own session's URL,
``http://127.0.0.1:<port>/s/<token>/mcp``, where the token is
``<session id>.<HMAC(key, session id)>``: the daemon takes the session from the
token, so a channel serves that one session and nothing else of the daemon's API.

The key is ``CHORUS_HOME/run/channel.key`` (0600; CHORUS_HOME is hidden inside the
sandbox). It outlives the daemon, and so do the tokens: a body left running when
the daemon stopped still reaches the next one (which listens on the same port, see
``chorus.mcpserver``). This module is light (standard library only): it mints and
checks tokens; the daemon, which serves the channel, says where it listens with
:func:`open_channel`. A body whose CLI carries MCP on its own stdio (a live Claude)
is given the server in-band instead (``McpServer.inband``, bound to its session
here): its pipe is the session's own, and no URL or token is in its command line.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import os
import re
import secrets
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chorus._errors import ConfigError
from chorus.bodies._body import McpServer
from chorus.config import run_dir

#: The name of Chorus's own MCP server in every body (the policy allows it as Chorus's).
SERVER_NAME = "chorus"
#: The channel of a body started before a session owns it (a spare): its tools run
#: for no session.
NO_SESSION = "-"
#: What a session id may be made of (the store's ids are hex).
_CHANNEL_ID = re.compile(r"[A-Za-z0-9_-]{1,128}")
_KEY_BYTES = 32
_MAC_CHARS = 32
#: The stdio relay for agents that take only stdio MCP servers (``_relay.py``).
RELAY = Path(__file__).with_name("_relay.py")


def channel_key_path() -> Path:
    """``CHORUS_HOME/run/channel.key``: the secret every session's token is made with."""
    return run_dir() / "channel.key"


def channel_key(path: Path | None = None) -> bytes:
    """The key, made (0600) on first use; safe when two processes make it at once."""
    path = path or channel_key_path()
    if not path.exists():
        _make_key(path)
    key = path.read_bytes()
    if len(key) != _KEY_BYTES:
        raise ConfigError(f"{path} is not a channel key ({len(key)} bytes): delete it")
    return key


def _make_key(path: Path) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(secrets.token_bytes(_KEY_BYTES))
    try:
        os.link(tmp, path)  # never replaces a key another process made first
    except FileExistsError:
        pass
    finally:
        tmp.unlink()


def session_token(key: bytes, channel_id: str) -> str:
    """The token of ``channel_id`` (a session id, or :data:`NO_SESSION`)."""
    if not _CHANNEL_ID.fullmatch(channel_id):
        raise ValueError(f"not a channel id: {channel_id!r}")
    return f"{channel_id}.{_mac(key, channel_id)}"


def token_channel(key: bytes, token: str) -> str | None:
    """The channel id ``token`` was made for; None when it was not made with ``key``."""
    channel_id, dot, mac = token.rpartition(".")
    if not dot or not _CHANNEL_ID.fullmatch(channel_id):
        return None
    return channel_id if hmac.compare_digest(_mac(key, channel_id), mac) else None


def _mac(key: bytes, channel_id: str) -> str:
    digest = hmac.new(key, b"chorus-channel\0" + channel_id.encode(), hashlib.sha256)
    return digest.hexdigest()[:_MAC_CHARS]


#: Answers one JSON-RPC message of a channel (its id first) in this process.
ChannelAnswer = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any] | None]]


@dataclass(frozen=True, slots=True)
class Channel:
    """Where this process serves the channel: loopback ``host:port``, with ``key``;
    ``answer`` serves a channel's messages in this process, for a CLI that carries
    MCP on its own stdio (no HTTP, no token: the pipe is the session's own)."""

    host: str
    port: int
    key: bytes
    answer: ChannelAnswer | None = field(default=None, compare=False)

    def url(self, session_id: str | None) -> str:
        token = session_token(self.key, session_id or NO_SESSION)
        return f"http://{self.host}:{self.port}/s/{token}/mcp"

    def server(self, session_id: str | None) -> McpServer:
        """Chorus's MCP server for ``session_id``, as a body's CLI is given it."""
        inband = None
        if self.answer is not None:
            inband = functools.partial(self.answer, session_id or NO_SESSION)
        return McpServer(url=self.url(session_id), required=True, inband=inband)


_OPEN: list[Channel] = []


def open_channel(channel: Channel) -> None:
    """Say that this process serves ``channel`` (the daemon, once it listens)."""
    _OPEN.append(channel)


def close_channel(channel: Channel) -> None:
    if channel in _OPEN:
        _OPEN.remove(channel)


def channel_servers(session_id: str | None) -> dict[str, McpServer]:
    """``{SERVER_NAME: server}`` for a body of ``session_id``; empty where no channel
    is served in this process (a body started outside the daemon)."""
    return {SERVER_NAME: _OPEN[-1].server(session_id)} if _OPEN else {}


def relay_server(server: McpServer) -> McpServer:
    """A stdio stand-in for the HTTP ``server``, for a CLI that takes only stdio ones:
    a few-millisecond relay (standard library only, ``-S -I``) to the same URL."""
    if server.url is None:
        return server
    headers = tuple(f"{name}: {value}" for name, value in server.headers.items())
    args = ("-S", "-I", str(RELAY), server.url, *headers)
    return McpServer(sys.executable, args, required=server.required)
