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
from chorus.agents._login import Login, cli_family, find_login

__all__ = [
    "PINNED",
    "AgentInfo",
    "Login",
    "PinnedAgent",
    "agents_dir",
    "cli_family",
    "describe_agents",
    "find_agent",
    "find_login",
    "install_agents",
]
