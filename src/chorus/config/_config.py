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
from chorus.config._gateway import settings_from_tables
from chorus.config._home import chorus_home


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class AgentConfig(_Strict):
    """An agent CLI entry: a path override for a built-in, or a whole ACP agent."""

    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    protocol: str | None = None


class SandboxConfig(_Strict):
    """``[sandbox]``: the OS sandbox every body starts in (see ``chorus.sandbox``)."""

    #: auto: enforce where bubblewrap is available, else off (``chorus doctor`` says
    #: which); enforce: refuse to start a body without it; off: no sandbox.
    mode: Literal["auto", "enforce", "off"] = "auto"


class DaemonConfig(_Strict):
    max_parallel_jobs: int = Field(default=3, ge=1, le=64)
    #: How many times a job restarts a crashed body (native resume) before failing.
    max_body_restarts: int = Field(default=2, ge=0, le=10)
    notifications: bool = True
    #: Close a session's body after this long with nothing to do; its next job resumes
    #: natively (0: keep bodies until the daemon stops).
    session_idle_timeout_s: float = Field(default=600.0, ge=0)
    #: Keep one pre-started spare CLI per recently used (body, cwd), so a new session
    #: skips the CLI's boot (costs one idle CLI process each; see the README).
    spare_bodies: bool = False


class RouterConfig(_Strict):
    """Routing and failover (issue 10). Cooldowns back off exponentially per provider."""

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


class ChorusConfig(_Strict):
    """The whole config file. Unknown keys are errors, not silently ignored."""

    agents: dict[str, AgentConfig] = Field(default_factory=dict)
    daemon: DaemonConfig = Field(default_factory=DaemonConfig)
    sandbox: SandboxConfig = Field(default_factory=SandboxConfig)
    router: RouterConfig = Field(default_factory=RouterConfig)
    #: ``[gateway]`` and ``[brain]``: validated by their models (``config._gateway``).
    gateway: dict[str, Any] = Field(default_factory=dict)
    brain: dict[str, Any] = Field(default_factory=dict)
    #: ``[memory]``: validated by ``chorus.memory.MemorySettings``.
    memory: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _gateway_tables(self) -> ChorusConfig:
        settings_from_tables({"gateway": self.gateway, "brain": self.brain}, where="tables")
        return self

    @model_validator(mode="after")
    def _memory_table(self) -> ChorusConfig:
        from chorus.memory import memory_settings  # the memory package imports this one

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
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
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
