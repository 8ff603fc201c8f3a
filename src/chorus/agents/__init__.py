"""The real agent CLIs: pinned versions, a project-local install, and lookup."""

from chorus.agents._install import (
    PINNED,
    AgentInfo,
    PinnedAgent,
    agents_dir,
    describe_agents,
    find_agent,
    install_agents,
)

__all__ = [
    "PINNED",
    "AgentInfo",
    "PinnedAgent",
    "agents_dir",
    "describe_agents",
    "find_agent",
    "install_agents",
]
