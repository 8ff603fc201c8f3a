"""Where Chorus keeps its state, and its validated configuration."""

from chorus.config._config import (
    AgentConfig,
    ChorusConfig,
    DaemonConfig,
    RouterConfig,
    load_config,
)
from chorus.config._home import chorus_home, run_dir, sessions_dir

__all__ = [
    "AgentConfig",
    "ChorusConfig",
    "DaemonConfig",
    "RouterConfig",
    "chorus_home",
    "load_config",
    "run_dir",
    "sessions_dir",
]
