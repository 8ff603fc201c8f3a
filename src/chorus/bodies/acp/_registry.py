"""ACP agents by name: built-in entries plus whatever ``config.toml`` adds.

Any ACP agent is usable by configuration alone::

    [agents.my-agent]
    protocol = "acp"
    command = "npx"
    args = ["-y", "@acme/my-acp-agent"]
    env = { ACME_API_KEY = "..." }

A ``[agents.<built-in>]`` section overrides a built-in entry's command, args or
env (added to the built-in env) and keeps its quirks and capabilities.

The registry is read from the config it is given each time (nothing is cached), so
a daemon that reloads its config adds, changes and removes agents at once.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType

from chorus._errors import AgentNotFoundError, ConfigError, UnknownBodyError
from chorus.agents import agents_dir
from chorus.bodies._capabilities import Capabilities, Support
from chorus.bodies.acp._quirks import (
    CLAUDE_CODE_ACP_QUIRKS,
    CODEX_ACP_QUIRKS,
    GEMINI_QUIRKS,
    AcpQuirks,
)
from chorus.config import ChorusConfig, load_config

ACP_CAPABILITIES = Capabilities(
    interrupt=Support.NATIVE,  # session/cancel
    set_model=Support.NATIVE,  # session/set_model (unstable; refused by some agents)
    set_permission_mode=Support.NATIVE,  # session/set_mode over the agent's own modes
    max_thinking_tokens=Support.UNSUPPORTED,
    steer=Support.UNSUPPORTED,
    permission_callback=Support.NATIVE,  # session/request_permission
    resume=Support.NATIVE,  # session/load, only when the agent advertises loadSession
    fork=Support.UNSUPPORTED,
    usage=Support.NATIVE,  # PromptResponse.usage (unstable) where sent
    cost=Support.UNSUPPORTED,
    rate_limit_signal=Support.EMULATED,  # classified from the prompt's JSON-RPC error text
)
"""What the protocol offers; a given agent may still refuse a control at run time."""

GEMINI_ACP_CAPABILITIES = replace(
    ACP_CAPABILITIES,
    # session/load (its chat file of the current minute renamed first: the load resets it)
    rate_limit_signal=Support.NATIVE,  # JSON-RPC error code 429 on session/prompt
)


#: A configured agent's name is a body name: on the command line, in file names.
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


@dataclass(frozen=True, slots=True)
class AcpAgent:
    """How to start one ACP agent and what to expect of it."""

    name: str
    command: str
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    package: str | None = None
    quirks: AcpQuirks = field(default_factory=AcpQuirks)
    capabilities: Capabilities = ACP_CAPABILITIES

    def executable(self) -> Path:
        """The program to run: a path as given, else the project-local install
        (``.agents/node_modules/.bin``), else ``PATH``."""
        if "/" in self.command:
            path = Path(self.command).expanduser()
            if path.exists():
                return path
        else:
            local = agents_dir() / "node_modules" / ".bin" / self.command
            if local.exists():
                return local
            found = shutil.which(self.command)
            if found:
                return Path(found)
        hint = f" (npm package {self.package})" if self.package else ""
        raise AgentNotFoundError(f"ACP agent {self.name!r}: {self.command!r} not found{hint}")


BUILTIN_AGENTS: Mapping[str, AcpAgent] = MappingProxyType(
    {
        "gemini": AcpAgent(
            name="gemini",
            command="gemini",
            # --debug: only then does Gemini put a shell tool's output (exactly what
            # the model receives) in its tool_call_update; otherwise the content is
            # empty. It costs ~50 stderr lines per session.
            args=("--acp", "--debug"),
            package="@google/gemini-cli",
            quirks=GEMINI_QUIRKS,
            capabilities=GEMINI_ACP_CAPABILITIES,
        ),
        "claude-code-acp": AcpAgent(
            name="claude-code-acp",
            command="claude-code-acp",
            package="@zed-industries/claude-code-acp",
            quirks=CLAUDE_CODE_ACP_QUIRKS,
        ),
        "codex-acp": AcpAgent(
            name="codex-acp",
            command="codex-acp",
            package="@zed-industries/codex-acp",
            quirks=CODEX_ACP_QUIRKS,
        ),
    }
)


def acp_agent(name: str, config: ChorusConfig | None = None) -> AcpAgent:
    """The agent ``name``: a built-in entry (with config overrides) or a config entry
    with ``protocol = "acp"``. Raises :class:`UnknownBodyError` otherwise."""
    config = config if config is not None else load_config()
    built_in = BUILTIN_AGENTS.get(name)
    entry = config.agents.get(name)
    if entry is None:
        if built_in is None:
            raise UnknownBodyError(f"no ACP agent named {name!r} (built in or configured)")
        return built_in
    if built_in is not None:
        return replace(
            built_in,
            command=entry.command or built_in.command,
            args=tuple(entry.args) if entry.args else built_in.args,
            env=MappingProxyType({**built_in.env, **entry.env}),
        )
    if entry.protocol != "acp":
        raise UnknownBodyError(f'agent {name!r} is configured without protocol = "acp"')
    if not _NAME.fullmatch(name):
        raise ConfigError(
            f"agents.{name}: an ACP agent's name is a body name: up to 64 letters, digits,"
            " '.', '_' or '-', starting with a letter or digit"
        )
    if not entry.command:
        raise ConfigError(f"[agents.{name}] needs a command to run an ACP agent")
    return AcpAgent(
        name=name, command=entry.command, args=tuple(entry.args), env=MappingProxyType(entry.env)
    )


def acp_agents(config: ChorusConfig | None = None) -> dict[str, AcpAgent]:
    """Every ACP agent known by name: built-ins and ``protocol = "acp"`` config entries."""
    config = config if config is not None else load_config()
    names = [*BUILTIN_AGENTS, *(n for n, a in config.agents.items() if a.protocol == "acp")]
    return {name: acp_agent(name, config) for name in dict.fromkeys(names)}
