"""Where Chorus keeps its state, and its validated configuration."""

from __future__ import annotations

from chorus._lazy import lazy_names

#: ``typing`` is not imported at run time (the names load on first use).
TYPE_CHECKING = False

if TYPE_CHECKING:
    from chorus.config._config import (
        AgentConfig,
        BudgetConfig,
        ChorusConfig,
        DaemonConfig,
        MeterConfig,
        ModelPrice,
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
    from chorus.config._memory import EXTRACTION_ENV, MemorySettings, memory_settings

__all__ = [
    "DEFAULT_PORT",
    "EXTRACTION_ENV",
    "AgentConfig",
    "BrainConfig",
    "BudgetConfig",
    "ChorusConfig",
    "DaemonConfig",
    "DashboardConfig",
    "FlagsConfig",
    "GatewayConfig",
    "GatewaySettings",
    "MemorySettings",
    "MeterConfig",
    "ModelPrice",
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
    "memory_settings",
    "private_home",
    "private_umask",
    "run_dir",
    "sessions_dir",
    "settings_from_tables",
    "tighten_home",
]

#: Each public name's private module (and its name there): loaded on first use.
_LAZY: dict[str, tuple[str, str]] = {
    "AgentConfig": ("chorus.config._config", "AgentConfig"),
    "BudgetConfig": ("chorus.config._config", "BudgetConfig"),
    "ChorusConfig": ("chorus.config._config", "ChorusConfig"),
    "DaemonConfig": ("chorus.config._config", "DaemonConfig"),
    "MeterConfig": ("chorus.config._config", "MeterConfig"),
    "ModelPrice": ("chorus.config._config", "ModelPrice"),
    "RetryConfig": ("chorus.config._config", "RetryConfig"),
    "RouterConfig": ("chorus.config._config", "RouterConfig"),
    "RoutinesConfig": ("chorus.config._config", "RoutinesConfig"),
    "SandboxConfig": ("chorus.config._config", "SandboxConfig"),
    "StoreConfig": ("chorus.config._config", "StoreConfig"),
    "WorktreeConfig": ("chorus.config._config", "WorktreeConfig"),
    "load_config": ("chorus.config._config", "load_config"),
    "DashboardConfig": ("chorus.config._flags_dashboard", "DashboardConfig"),
    "FlagsConfig": ("chorus.config._flags_dashboard", "FlagsConfig"),
    "duration_seconds": ("chorus.config._flags_dashboard", "duration_seconds"),
    "DEFAULT_PORT": ("chorus.config._gateway", "DEFAULT_PORT"),
    "BrainConfig": ("chorus.config._gateway", "BrainConfig"),
    "GatewayConfig": ("chorus.config._gateway", "GatewayConfig"),
    "GatewaySettings": ("chorus.config._gateway", "GatewaySettings"),
    "load_gateway_settings": ("chorus.config._gateway", "load_gateway_settings"),
    "settings_from_tables": ("chorus.config._gateway", "settings_from_tables"),
    "body_umask": ("chorus.config._home", "body_umask"),
    "chorus_home": ("chorus.config._home", "chorus_home"),
    "private_home": ("chorus.config._home", "private_home"),
    "private_umask": ("chorus.config._home", "private_umask"),
    "run_dir": ("chorus.config._home", "run_dir"),
    "sessions_dir": ("chorus.config._home", "sessions_dir"),
    "tighten_home": ("chorus.config._home", "tighten_home"),
    "EXTRACTION_ENV": ("chorus.config._memory", "EXTRACTION_ENV"),
    "MemorySettings": ("chorus.config._memory", "MemorySettings"),
    "memory_settings": ("chorus.config._memory", "memory_settings"),
}


__getattr__, __dir__ = lazy_names(__name__, _LAZY, __all__)
