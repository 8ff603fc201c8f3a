"""Where Chorus keeps its state, and its validated configuration."""

from chorus.config._config import (
    AgentConfig,
    BudgetConfig,
    ChorusConfig,
    DaemonConfig,
    RetryConfig,
    RouterConfig,
    RoutinesConfig,
    SandboxConfig,
    StoreConfig,
    WorktreeConfig,
    load_config,
)
from chorus.config._gateway import (
    DEFAULT_PORT,
    BrainConfig,
    GatewayConfig,
    GatewaySettings,
    load_gateway_settings,
    settings_from_tables,
)
from chorus.config._home import chorus_home, private_home, run_dir, sessions_dir

__all__ = [
    "DEFAULT_PORT",
    "AgentConfig",
    "BrainConfig",
    "BudgetConfig",
    "ChorusConfig",
    "DaemonConfig",
    "GatewayConfig",
    "GatewaySettings",
    "RetryConfig",
    "RouterConfig",
    "RoutinesConfig",
    "SandboxConfig",
    "StoreConfig",
    "WorktreeConfig",
    "chorus_home",
    "load_config",
    "load_gateway_settings",
    "private_home",
    "run_dir",
    "sessions_dir",
    "settings_from_tables",
]
