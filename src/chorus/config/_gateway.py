"""The ``[gateway]`` and ``[brain]`` tables of ``config.toml``.

Both are validated here, with the rest of the config (unknown keys are errors).
Every knob has a default, so a missing file or table means "loopback gateway on
port 7719, no brain". The gateway package reads them; the config package does
not depend on the gateway.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from chorus._errors import ConfigError
from chorus._limits import MAX_EVENT_BYTES
from chorus.config._home import chorus_home

#: Default TCP port of the gateway listener (loopback only unless ``host`` says otherwise).
DEFAULT_PORT = 7719


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class GatewayConfig(_Strict):
    """``[gateway]``: the inbound listener, its limits and the sessions it runs."""

    #: Serve UCP on TCP (``host:port``) besides the daemon's unix socket.
    tcp: bool = True
    host: str = "127.0.0.1"
    #: 0 picks a free port (written to ``run/gateway.json``).
    port: int = Field(default=DEFAULT_PORT, ge=0, le=65535)
    #: The bearer token; unset means ``run/gateway.token``.
    token: str | None = Field(default=None, min_length=16)
    #: Origins allowed to connect. Browsers always send ``Origin``; none are allowed by default.
    allowed_origins: list[str] = Field(default_factory=list)
    #: Frames above this are answered ``frame_too_large`` without being parsed.
    max_frame_bytes: int = Field(default=MAX_EVENT_BYTES, ge=1024, le=64 << 20)
    #: Messages above this are refused by the WebSocket layer itself (close code 1009).
    max_message_bytes: int = Field(default=4 * MAX_EVENT_BYTES, ge=1024, le=256 << 20)
    #: Control requests one connection may have in flight.
    max_pending: int = Field(default=32, ge=1, le=10_000)
    #: Sustained inbound frames per second per connection, and the burst above it.
    rate_per_s: float = Field(default=100.0, gt=0)
    rate_burst: int = Field(default=200, ge=1)
    #: Outbound frames queued per connection before senders wait (back-pressure).
    send_queue: int = Field(default=1000, ge=1, le=1_000_000)
    #: A single send blocked this long closes the connection (a stalled client).
    send_timeout_s: float = Field(default=30.0, gt=0)
    #: Chorus sends ``keep_alive`` this often.
    keepalive_interval_s: float = Field(default=15.0, gt=0)
    #: A connection that sends nothing (not even ``keep_alive``) this long is closed.
    #: Dead peers are found sooner by the WebSocket pings; this reaps silent ones.
    idle_timeout_s: float = Field(default=300.0, gt=0)
    #: WebSocket protocol pings on the TCP listener (None disables them).
    ping_interval_s: float | None = Field(default=20.0, gt=0)
    ping_timeout_s: float | None = Field(default=20.0, gt=0)
    #: Deadline of every control response, and of ``initialize`` (it may start a CLI).
    control_deadline_s: float = Field(default=30.0, gt=0)
    initialize_deadline_s: float = Field(default=120.0, gt=0)
    #: User messages waiting behind the running turn, per session.
    max_queued_messages: int = Field(default=16, ge=1, le=10_000)
    #: Live sessions (each one a running agent CLI).
    max_sessions: int = Field(default=16, ge=1, le=1000)
    #: A session with no connection for this long is closed (0: never).
    session_idle_timeout_s: float = Field(default=1800.0, ge=0)
    #: The body ``initialize`` starts when it names none.
    default_body: str = "claude"
    #: Folders a brain's session may run in (and under); empty: any but ``/`` and the
    #: policy's denied paths. A session's folder is its sandbox's writable root.
    allowed_cwds: list[str] = Field(default_factory=list)
    #: Open TCP connections at once, all peers together; beyond it a new one is closed
    #: at accept (the daemon's file descriptors, and so its unix API, stay available).
    max_connections: int = Field(default=256, ge=1, le=100_000)
    #: Open TCP connections from one peer address.
    max_connections_per_peer: int = Field(default=32, ge=1, le=100_000)
    #: A TCP connection must send its whole request head within this (slowloris).
    header_timeout_s: float = Field(default=10.0, gt=0)
    #: Whether ``/metrics`` on TCP needs the token too (the unix socket never does).
    metrics_require_token: bool = True


class BrainConfig(_Strict):
    """``[brain]``: Chorus dials a brain and serves UCP on that link."""

    #: Dial this brain when the daemon starts (``chorus connect`` sets one at run time).
    url: str | None = None
    #: What a brain's answer to a permission ask may do (only asks reach a brain; what
    #: the policy denies stays denied): ``advisory`` is logged only, ``escalate-only``
    #: may deny but not allow, ``governing`` decides the ask either way.
    authority: Literal["advisory", "escalate-only", "governing"] = "escalate-only"
    #: A body asked to vote (read-only) on elevated or critical tool calls of daemon
    #: jobs; its deny denies, its allow changes nothing (a cognitive firewall).
    second_opinion: str | None = None
    #: When not empty, a brain URL must fully match one of these regular expressions.
    url_allowlist: list[str] = Field(default_factory=list)
    #: Name of an environment variable holding a bearer token to send to the brain.
    token_env: str | None = None
    #: Outbound frames queued on the link before senders wait.
    buffer: int = Field(default=1000, ge=1, le=1_000_000)
    #: Dials per outage (the first dial included) before the link gives up.
    max_attempts: int = Field(default=3, ge=1, le=1000)
    #: Backoff before retry n (n >= 1) is ``min(backoff_max_s, backoff_base_s * 2**(n-1))``.
    backoff_base_s: float = Field(default=1.0, ge=0)
    backoff_max_s: float = Field(default=30.0, ge=0)
    #: WebSocket pings on the link (the heartbeat) and how long a pong may take.
    ping_interval_s: float = Field(default=10.0, gt=0)
    ping_timeout_s: float = Field(default=20.0, gt=0)
    #: Deadline of one dial (TCP, TLS and the WebSocket handshake).
    connect_timeout_s: float = Field(default=10.0, gt=0)

    @field_validator("url_allowlist")
    @classmethod
    def _regexes_compile(cls, patterns: list[str]) -> list[str]:
        for pattern in patterns:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"bad regular expression {pattern!r}: {exc}") from exc
        return patterns


class GatewaySettings(_Strict):
    """Both tables together."""

    gateway: GatewayConfig = Field(default_factory=GatewayConfig)
    brain: BrainConfig = Field(default_factory=BrainConfig)


def load_gateway_settings(path: Path | None = None) -> GatewaySettings:
    """Read ``[gateway]`` and ``[brain]`` from ``config.toml`` (defaults when absent).

    Raises :class:`chorus.ConfigError` naming the file and the key at fault.
    """
    path = path or chorus_home() / "config.toml"
    if not path.exists():
        return GatewaySettings()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from exc
    return settings_from_tables(data, where=str(path))


def settings_from_tables(data: dict[str, Any], *, where: str = "config") -> GatewaySettings:
    """Validate the ``gateway`` and ``brain`` tables of an already parsed config."""
    tables = {key: data[key] for key in ("gateway", "brain") if key in data}
    try:
        return GatewaySettings.model_validate(tables)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors()
        )
        raise ConfigError(f"{where}: {problems}") from exc
