"""What every body can do, and whether it can start here: for ``chorus doctor`` and
``chorus agents list``.

One row per body name (built-in bodies, built-in ACP agents, ``config.toml``'s
ACP agents), each with its capability table (native / emulated / unsupported
per control) and the program it runs, flagged when that program is missing.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from chorus._errors import AgentNotFoundError
from chorus.agents import find_agent
from chorus.bodies._capabilities import Capabilities, Support
from chorus.bodies._registry import _BUILTIN, CLI_OF, acp_module, body_class
from chorus.config import ChorusConfig, load_config

#: When a body's model learns the policy's rule and reason for a refused call.
POLICY_REASON = {
    Support.NATIVE: "same turn, in the tool result",
    Support.EMULATED: "same turn, in a message Chorus adds",
    Support.UNSUPPORTED: "with the next prompt (the CLI refuses in its own words)",
}


@dataclass(frozen=True, slots=True)
class BodyInfo:
    """One body: how it is reached, whether its program is found, what it can do."""

    name: str
    kind: Literal["builtin", "acp"]
    program: str
    path: Path | None
    problem: str | None
    capabilities: Capabilities

    @property
    def installed(self) -> bool:
        return self.path is not None

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "program": self.program,
            "installed": self.installed,
            "path": str(self.path) if self.path else None,
            "problem": self.problem,
            "capabilities": self.capabilities.as_dict(),
            "policy_reason": POLICY_REASON[self.capabilities.denial_reason],
        }


def _found(find: Any) -> tuple[Path | None, str | None]:
    try:
        return find(), None
    except AgentNotFoundError as exc:
        return None, str(exc)


def _builtin(name: str, config: ChorusConfig) -> BodyInfo:
    cli = CLI_OF[name]
    path, problem = _found(lambda: find_agent(cli, config))
    caps = body_class(name, config).capabilities
    return BodyInfo(name, "builtin", cli, path, problem, caps)


def _acp(name: str, agent: Any) -> BodyInfo:
    path, problem = _found(agent.executable)
    return BodyInfo(name, "acp", agent.command, path, problem, agent.capabilities)


def body_catalog(config: ChorusConfig | None = None) -> list[BodyInfo]:
    """Every body Chorus knows with this config, built-in bodies first."""
    config = config if config is not None else load_config()
    rows = [_builtin(name, config) for name in _BUILTIN]
    acp: Any = acp_module()
    for name, agent in acp.acp_agents(config).items():
        if name not in _BUILTIN:
            rows.append(_acp(name, agent))
    return rows
