"""Body names → body classes, imported lazily so a missing extra never breaks startup.

Built-in names cover every CLI and mode; ``[agents.<name>]`` entries in
config.toml with ``protocol = "acp"`` add any ACP agent by config alone.
"""

from __future__ import annotations

import importlib
from typing import Any

from chorus._errors import UnknownBodyError
from chorus.bodies._body import Body, BodyOptions
from chorus.config import ChorusConfig, load_config

_BUILTIN: dict[str, tuple[str, str]] = {
    "claude": ("chorus.bodies.claude", "ClaudeBody"),
    "claude-print": ("chorus.bodies.claude", "ClaudePrintBody"),
    "codex": ("chorus.bodies.codex", "CodexBody"),
    "codex-exec": ("chorus.bodies.codex", "CodexExecBody"),
    "gemini": ("chorus.bodies.gemini", "GeminiAcpBody"),
    "gemini-headless": ("chorus.bodies.gemini", "GeminiBody"),
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
    acp: Any = importlib.import_module("chorus.bodies.acp")
    return [n for n in acp.acp_agents(config) if n not in _BUILTIN]


def body_names(config: ChorusConfig | None = None) -> list[str]:
    """Every body name Chorus can start with this config."""
    config = config or load_config()
    return [*_BUILTIN, *_acp_names(config)]


def body_class(name: str, config: ChorusConfig | None = None) -> type[Body]:
    """The class for ``name``; :class:`UnknownBodyError` if nobody knows it."""
    config = config or load_config()
    if name in _BUILTIN:
        module, attr = _BUILTIN[name]
        cls: Any = getattr(importlib.import_module(module), attr)
        return cls  # type: ignore[no-any-return]
    if name in _acp_names(config):
        acp: Any = importlib.import_module("chorus.bodies.acp")
        return acp.AcpBody  # type: ignore[no-any-return]
    known = ", ".join(body_names(config))
    raise UnknownBodyError(f"unknown body {name!r}; known bodies: {known}")


def create_body(name: str, options: BodyOptions, config: ChorusConfig | None = None) -> Body:
    """Instantiate body ``name`` with ``options`` (config-defined ACP agents included)."""
    config = config or load_config()
    cls = body_class(name, config)
    if name in _BUILTIN:
        return cls(options)
    acp: Any = importlib.import_module("chorus.bodies.acp")
    return acp.open_acp_body(name, options, config=config)  # type: ignore[no-any-return]


def check_installed(name: str, config: ChorusConfig | None = None) -> None:
    """Raise :class:`UnknownBodyError` or :class:`AgentNotFoundError` unless body
    ``name`` can start here (its CLI or ACP agent program is found)."""
    from chorus.agents import find_agent

    config = config or load_config()
    if name in _BUILTIN:
        find_agent(CLI_OF[name])
        return
    if name not in _acp_names(config):
        known = ", ".join(body_names(config))
        raise UnknownBodyError(f"unknown body {name!r}; known bodies: {known}")
    acp: Any = importlib.import_module("chorus.bodies.acp")
    acp.acp_agent(name, config).executable()
