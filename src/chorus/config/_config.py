"""``CHORUS_HOME/config.toml``: loaded with tomllib, validated with pydantic.

A missing file means defaults. A malformed or invalid file raises
:class:`chorus.ConfigError` naming the file and the offending key, so the CLI can
print it and exit 2 without touching anything else.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from chorus._errors import ConfigError
from chorus.config._home import chorus_home


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class AgentConfig(_Strict):
    """An agent CLI entry: a path override for a built-in, or a whole ACP agent."""

    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    protocol: str | None = None


class DaemonConfig(_Strict):
    max_parallel_jobs: int = Field(default=3, ge=1, le=64)
    #: How many times a job restarts a crashed body (native resume) before failing.
    max_body_restarts: int = Field(default=2, ge=0, le=10)
    notifications: bool = True


class ChorusConfig(_Strict):
    """The whole config file. Unknown keys are errors, not silently ignored."""

    agents: dict[str, AgentConfig] = Field(default_factory=dict)
    daemon: DaemonConfig = Field(default_factory=DaemonConfig)
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
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors()
        )
        raise ConfigError(f"{path}: {problems}") from exc
