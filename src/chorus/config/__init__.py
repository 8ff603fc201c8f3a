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
from chorus.config._flags_dashboard import DashboardConfig, FlagsConfig, duration_seconds
from chorus.config._gateway import (
    DEFAULT_PORT,
    BrainConfig,
    GatewayConfig,
    GatewaySettings,
    load_gateway_settings,
    settings_from_tables,
)
from chorus.config._home import (
    body_umask,
    chorus_home,
    private_home,
    private_umask,
    run_dir,
    sessions_dir,
    tighten_home,
)

__all__ = [
    "DEFAULT_PORT",
    "AgentConfig",
    "BrainConfig",
    "BudgetConfig",
    "ChorusConfig",
    "DaemonConfig",
    "DashboardConfig",
    "FlagsConfig",
    "GatewayConfig",
    "GatewaySettings",
    "RetryConfig",
    "RouterConfig",
    "RoutinesConfig",
    "SandboxConfig",
    "StoreConfig",
    "WorktreeConfig",
    "body_umask",
    "chorus_home",
    "duration_seconds",
    "load_config",
    "load_gateway_settings",
    "private_home",
    "private_umask",
    "run_dir",
    "sessions_dir",
    "settings_from_tables",
    "tighten_home",
]
