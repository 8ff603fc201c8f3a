"""Body names → body classes, imported lazily so a missing extra never breaks startup.

Built-in names cover every CLI and mode; ``[agents.<name>]`` entries in
config.toml with ``protocol = "acp"`` add any ACP agent by config alone. Every
function reads the config it is given (nothing is cached), so a reloaded config
adds, changes and removes ACP agents at once.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

from chorus._errors import ConfigError, UnknownBodyError
from chorus.bodies._body import Body, BodyOptions
from chorus.config import ChorusConfig, load_config


def _claude(attr: str) -> type[Body]:
    from chorus.bodies import claude

    return getattr(claude, attr)  # type: ignore[no-any-return]


def _codex(attr: str) -> type[Body]:
    from chorus.bodies import codex

    return getattr(codex, attr)  # type: ignore[no-any-return]


def _gemini(attr: str) -> type[Body]:
    from chorus.bodies import gemini

    return getattr(gemini, attr)  # type: ignore[no-any-return]


def acp_module() -> ModuleType:
    """The ACP bodies' package, imported when first needed (the ACP SDK is heavy)."""
    from chorus.bodies import acp

    return acp


#: Each built-in body: (its package's loader, the class's name in it).
_BUILTIN: dict[str, tuple[Callable[[str], type[Body]], str]] = {
    "claude": (_claude, "ClaudeBody"),
    "claude-print": (_claude, "ClaudePrintBody"),
    "codex": (_codex, "CodexBody"),
    "codex-exec": (_codex, "CodexExecBody"),
    "gemini": (_gemini, "GeminiAcpBody"),
    "gemini-headless": (_gemini, "GeminiBody"),
}
#: The binary each built-in body runs (for lookup and env from ``[agents.<cli>]``).
CLI_OF: dict[str, str] = {
    "claude": "claude",
    "claude-print": "claude",
    "codex": "codex",
    "codex-exec": "codex",
    "gemini": "gemini",
    "gemini-headless": "gemini",
}


def _acp_names(config: ChorusConfig) -> list[str]:
    """ACP agents (built-in entries such as codex-acp, and config entries)."""
    acp: Any = acp_module()
    _check_no_shadowing(config, acp.BUILTIN_AGENTS)
    return [n for n in acp.acp_agents(config) if n not in _BUILTIN]


def _check_no_shadowing(config: ChorusConfig, acp_builtins: Any) -> None:
    """A ``protocol = "acp"`` entry may not take the name of a built-in body that
    speaks another protocol: that body would run the ACP agent's command."""
    for name, entry in config.agents.items():
        if entry.protocol == "acp" and name in _BUILTIN and name not in acp_builtins:
            raise ConfigError(
                f"agents.{name}.protocol: {name!r} is a built-in body with its own protocol;"
                f" give the ACP agent another name (e.g. [agents.{name}-acp-mine])"
            )


def _unknown(name: str, config: ChorusConfig) -> UnknownBodyError:
    """The error for a body nobody knows, saying what a near miss lacks."""
    known = ", ".join(body_names(config))
    entry = config.agents.get(name)
    if entry is not None and entry.protocol != "acp":
        return UnknownBodyError(
            f'unknown body {name!r}: [agents.{name}] has no protocol = "acp" (add it to run'
            f" {name!r} as an ACP agent); known bodies: {known}"
        )
    return UnknownBodyError(f"unknown body {name!r}; known bodies: {known}")


def body_names(config: ChorusConfig | None = None) -> list[str]:
    """Every body name Chorus can start with this config."""
    config = config or load_config()
    return [*_BUILTIN, *_acp_names(config)]


def body_class(name: str, config: ChorusConfig | None = None) -> type[Body]:
    """The class for ``name``; :class:`UnknownBodyError` if nobody knows it."""
    config = config or load_config()
    if name in _BUILTIN:
        load, attr = _BUILTIN[name]
        return load(attr)
    if name in _acp_names(config):
        acp: Any = acp_module()
        return acp.AcpBody  # type: ignore[no-any-return]
    raise _unknown(name, config)


def create_body(name: str, options: BodyOptions, config: ChorusConfig | None = None) -> Body:
    """Instantiate body ``name`` with ``options`` (config-defined ACP agents included)."""
    config = config or load_config()
    cls = body_class(name, config)
    if name in _BUILTIN:
        return cls(options)
    acp: Any = acp_module()
    return acp.open_acp_body(name, options, config=config)  # type: ignore[no-any-return]


def check_installed(name: str, config: ChorusConfig | None = None) -> None:
    """Raise :class:`UnknownBodyError` or :class:`AgentNotFoundError` unless body
    ``name`` can start here (its CLI or ACP agent program is found)."""
    from chorus.agents import find_agent

    config = config or load_config()
    if name in _BUILTIN:
        find_agent(CLI_OF[name], config)
        return
    if name not in _acp_names(config):
        raise _unknown(name, config)
    acp: Any = acp_module()
    acp.acp_agent(name, config).executable()
