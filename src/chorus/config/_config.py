"""``CHORUS_HOME/config.toml``: loaded with tomllib, validated with pydantic.

A missing file means defaults. A malformed or invalid file raises
:class:`chorus.ConfigError` naming the file and the offending key, so the CLI can
print it and exit 2 without touching anything else.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from chorus._errors import ConfigError
from chorus.config._flags_dashboard import DashboardConfig, FlagsConfig
from chorus.config._gateway import settings_from_tables
from chorus.config._home import chorus_home
from chorus.config._memory import memory_settings


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class AgentConfig(_Strict):
    """An agent CLI entry: a path override for a built-in, or a whole ACP agent."""

    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    #: ``acp`` makes the entry a whole ACP agent; unset, it only overrides a built-in.
    protocol: Literal["acp"] | None = None


class SandboxConfig(_Strict):
    """``[sandbox]``: the OS sandbox every body starts in (see ``chorus.sandbox``)."""

    #: auto: enforce where bubblewrap is available, else off (``chorus doctor`` says
    #: which); enforce: refuse to start a body without it; off: no sandbox.
    mode: Literal["auto", "enforce", "off"] = "auto"
    #: Also run a CLI's own command sandbox inside this one (Codex's workspace
    #: sandbox: its commands without network, 80-150 ms more each). Off: this
    #: sandbox is the boundary for every body, and the CLI still asks Chorus.
    nested: bool = False


class DaemonConfig(_Strict):
    max_parallel_jobs: int = Field(default=3, ge=1, le=64)
    #: How many times a job restarts a crashed body (native resume) before failing.
    max_body_restarts: int = Field(default=2, ge=0, le=10)
    notifications: bool = True
    #: Close a session's body after this long with nothing to do; its next job resumes
    #: natively (0: keep bodies until the daemon stops).
    session_idle_timeout_s: float = Field(default=600.0, ge=0)
    #: Idle warm bodies kept at most (the least recently used beyond it is closed).
    max_idle_bodies: int = Field(default=16, ge=0, le=1000)
    #: Keep one pre-started spare CLI per recently used (body, cwd), so a new session
    #: skips the CLI's boot (costs one idle CLI process each; see the README).
    spare_bodies: bool = False
    #: Seconds between the ``: ping`` comments on an idle event stream; the client
    #: gives a stream up after a long silence (``CHORUS_STREAM_IDLE_S``, default 60).
    stream_ping_s: float = Field(default=15.0, gt=0, le=300)
    #: ``auto``: a new job whose folder is in a git repository runs in its own
    #: worktree unless it asks not to; ``never``: only when a job asks (``--worktree``).
    worktree: Literal["auto", "never"] = "never"
    #: Largest prompt a job may have (UTF-8 bytes); a bigger one is refused up front.
    max_prompt_bytes: int = Field(default=1 << 20, ge=1, le=1 << 30)
    #: A body a daemon left running (killed with SIGKILL, or stopped with
    #: ``--keep-bodies``) ends itself after this long with no daemon (0: it waits).
    orphan_timeout_s: float = Field(default=1800.0, ge=0)
    #: Longest each step of a body's start may take while its CLI runs (its stdin
    #: pipe, ``initialize``, ``session/new``, ``thread/start`` ...); a CLI that dies
    #: fails at once. A step past it is tried once more where that is safe.
    body_start_timeout_s: float = Field(default=60.0, gt=0)


class WorktreeConfig(_Strict):
    """``[worktree]``: where job worktrees live and how they are set up."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    #: Parent of ``<repo>/<job>`` folders; default ``CHORUS_HOME/worktrees``. Never a
    #: temp dir: OS temp cleaners delete a worktree's small ``.git`` file.
    root: str | None = None
    #: ``copy``: untracked files copied from the main checkout (globs, e.g. ``.env*``).
    copy_files: list[str] = Field(default_factory=list, alias="copy")
    #: A shell command run in a new worktree (e.g. ``npm ci``); failing, it undoes it.
    setup: str | None = None
    setup_timeout_s: float = Field(default=600.0, gt=0)


class RouterConfig(_Strict):
    """Routing and failover. Cooldowns back off exponentially per provider."""

    #: smart, round_robin, or ``<body>_only``.
    strategy: str = "smart"
    #: Bodies the router may pick and fail over between, in default preference order.
    bodies: list[str] = Field(default_factory=lambda: ["claude", "codex", "gemini"])
    #: Overrides of the routing matrix: class name → bodies in preference order.
    matrix: dict[str, list[str]] = Field(default_factory=dict)
    failover: bool = True
    cooldown_base_s: float = Field(default=30.0, gt=0)
    cooldown_max_s: float = Field(default=3600.0, gt=0)
    cooldown_multiplier: float = Field(default=2.0, ge=1.0)
    #: Chorus-level retries of a rate-limited turn on the same body before failover.
    rate_limit_retries: int = Field(default=1, ge=0, le=10)
    rate_limit_delay_s: float = Field(default=2.0, ge=0)
    #: Longest a job waits for a cooldown to end when no body is healthy.
    max_wait_s: float = Field(default=3600.0, ge=0)
    #: Token budget of the handoff bundle's trimmed history.
    handoff_tokens: int = Field(default=4000, ge=100)
    notify_on_failover: bool = True


class StoreConfig(_Strict):
    """``[store]``: where the durable log lives. No ``url``: SQLite in
    CHORUS_HOME. ``postgresql://user@host:port/db``: a PostgreSQL database shared
    by every daemon pointed at it (the password may also come from PGPASSWORD or
    ~/.pgpass, keeping it out of this file)."""

    url: str | None = None
    #: Connections per daemon (the writer and the listener take one each).
    pool_size: int = Field(default=8, ge=2, le=100)
    #: Seconds a claimed job's lease lasts without renewal before another node
    #: may take the job over; the worker renews it every third of that.
    lease_s: float = Field(default=30.0, ge=1.0, le=3600.0)
    #: A job whose lease expired this many claims in a row fails instead of being
    #: re-queued once more (its work may not be safe to repeat forever).
    max_claims: int = Field(default=3, ge=1, le=100)
    #: Writes (events, raw lines, job changes) a daemon buffers while the database
    #: is unreachable; past that it refuses new jobs until the database is back.
    max_buffered: int = Field(default=10_000, ge=10, le=1_000_000)
    #: The host name this daemon registers as (unset: the machine's). A job whose
    #: working directory is on this host carries it as its affinity.
    host: str | None = Field(default=None, min_length=1, max_length=255)
    #: Directories every node sees at the same path (a network share): a job whose
    #: cwd lies under one may run on any node; any other cwd pins it to its host.
    shared_paths: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _known_scheme(self) -> StoreConfig:
        if self.url is not None and not self.url.startswith(("postgresql://", "postgres://")):
            scheme = self.url.split("://", 1)[0] if "://" in self.url else self.url[:20]
            raise ValueError(
                f"url: unsupported store {scheme!r}; use postgresql://user@host:port/database"
                " or leave url out for SQLite in CHORUS_HOME"
            )
        return self


class RoutinesConfig(_Strict):
    """``[routines]``: defaults for routine files and the heartbeat."""

    #: IANA timezone for cron and ``at`` routines that name none. Unset: such a
    #: routine is refused (never silently UTC).
    timezone: str | None = None
    heartbeat: bool = True
    #: Seconds, or a duration such as "30m".
    heartbeat_interval: str | float = "30m"
    #: "HH:MM-HH:MM" in ``timezone``; unset: all day.
    active_hours: str | None = None
    #: Body of heartbeat jobs (unset: the router chooses).
    heartbeat_body: str | None = None


class RetryConfig(_Strict):
    """``[retry]``: jobs that failed on quota or a transient error are queued again
    after a backoff (``base_s * 2**(n-1)``, capped), at most ``max_retries`` times."""

    max_retries: int = Field(default=3, ge=0, le=20)
    base_s: float = Field(default=30.0, gt=0)
    max_s: float = Field(default=3600.0, gt=0)


class ModelPrice(_Strict):
    """One model's price in USD per million tokens (``[meter.prices."<model>"]``)."""

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cached_input: float | None = Field(default=None, ge=0)
    cache_write: float | None = Field(default=None, ge=0)


class MeterConfig(_Strict):
    """``[meter]``: with ``enabled`` (the default), every body's model API calls go
    through Chorus's meter, which reads the usage and quota the providers state, holds
    ``[budget]`` per request and keeps known secrets from the providers. The meter is
    a small process of its own that outlives the daemon (a request in flight when the
    daemon dies finishes; its record waits for the next daemon). A body whose login
    cannot go through it (Codex's built-in provider, Gemini's Google login) runs
    direct, "unmetered" in ``status``, its usage what the CLI reports."""

    enabled: bool = True
    #: Route away from a body once a provider states it has at most this share of a
    #: rate-limit window left (requests or tokens), until that window resets.
    reserve: float = Field(default=0.02, ge=0, le=1)
    #: Hide known secrets (the vault's, credential-named ``[agents.*.env]`` values)
    #: from the providers as ``[SECRET:<name>]``, restored in the model's tool calls.
    hide_secrets: bool = True
    #: Prices by model name or prefix, over the table Chorus ships (``chorus.meter``).
    prices: dict[str, ModelPrice] = Field(default_factory=dict)


class BudgetConfig(_Strict):
    """``[budget]``: spending limits in USD, on the metered cost of each
    model request (the cost a body reports where it was not metered). A request that
    would start over a limit is refused by the meter; a job over one fails with
    ``budget_exceeded``."""

    #: All bodies together, per local day.
    daily_usd: float | None = Field(default=None, gt=0)
    #: One job, all its turns (failovers and restarts included).
    per_job_usd: float | None = Field(default=None, gt=0)
    #: Per body, per local day: ``[budget.bodies] claude = 5.0``.
    bodies: dict[str, float] = Field(default_factory=dict)


class ChorusConfig(_Strict):
    """The whole config file. Unknown keys are errors, not silently ignored."""

    agents: dict[str, AgentConfig] = Field(default_factory=dict)
    daemon: DaemonConfig = Field(default_factory=DaemonConfig)
    sandbox: SandboxConfig = Field(default_factory=SandboxConfig)
    router: RouterConfig = Field(default_factory=RouterConfig)
    store: StoreConfig = Field(default_factory=StoreConfig)
    routines: RoutinesConfig = Field(default_factory=RoutinesConfig)
    retry: RetryConfig = Field(default_factory=RetryConfig)
    worktree: WorktreeConfig = Field(default_factory=WorktreeConfig)
    budget: BudgetConfig = Field(default_factory=BudgetConfig)
    meter: MeterConfig = Field(default_factory=MeterConfig)
    flags: FlagsConfig = Field(default_factory=FlagsConfig)
    dashboard: DashboardConfig = Field(default_factory=DashboardConfig)
    #: ``[gateway]`` and ``[brain]``: validated by their models (``config._gateway``).
    gateway: dict[str, Any] = Field(default_factory=dict)
    brain: dict[str, Any] = Field(default_factory=dict)
    #: ``[memory]``: validated by :class:`MemorySettings` (``config._memory``).
    memory: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _gateway_tables(self) -> ChorusConfig:
        settings_from_tables({"gateway": self.gateway, "brain": self.brain}, where="tables")
        return self

    @model_validator(mode="after")
    def _memory_table(self) -> ChorusConfig:
        memory_settings(self.memory)
        return self

    redact_patterns: list[str] = Field(default_factory=list)


def config_path() -> Path:
    return chorus_home() / "config.toml"


def load_config(path: Path | None = None) -> ChorusConfig:
    """Load and validate the config; defaults when the file does not exist."""
    path = path or config_path()
    if not path.exists():
        return ChorusConfig()
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:  # a directory, unreadable, ...
        raise ConfigError(f"{path}: cannot be read ({exc.strerror}); it must be a file") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from exc
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from exc
    try:
        return ChorusConfig.model_validate(data)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from exc
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors()
        )
        raise ConfigError(f"{path}: {problems}") from exc
