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
_NEXT = "the policy's reason comes with the next prompt"
#: What a built-in body does not do as the others do, as the real CLIs showed it (the
#: policy matrix, tests/daemon/test_policy_matrix_e2e.py, and bench/bench_reattach.py).
LIMITS: dict[str, tuple[str, ...]] = {
    "gemini": (
        "a refusal over ACP carries no reason: Chorus gives the policy's reason with a "
        "prompt at the end of the same turn",
        "Gemini's own checks refuse a .env read and a write outside the workspace before "
        "Chorus is asked, naming no path: the model gets Gemini's words, not the policy's",
        f"in plan mode Gemini's own check refuses a write first: {_NEXT}",
    ),
    "claude-print": (f"claude -p cannot ask: Claude refuses in its own words; {_NEXT}",),
    "codex-exec": (
        f"commands Codex runs unasked meet the sandbox, and exec rejects a patch in its own "
        f"words: {_NEXT}",
    ),
    "gemini-headless": (
        f"Gemini's own checks refuse a .env read, a write outside the workspace and a write "
        f"in plan mode first: {_NEXT}",
    ),
    "claude-code-acp": (
        f"a command it runs unasked (cat) meets the sandbox (Permission denied): {_NEXT}",
        "killed in a new session's first turn it has stored no conversation (its own "
        "Claude Code writes a turn at the turn's end): the session is rebuilt from "
        "Chorus's log",
    ),
    "codex-acp": (
        "a command Codex knows as safe (cat) runs unasked and is reported as no tool call: "
        "neither asked nor logged, the sandbox still holds (.env is hidden)",
    ),
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
            "limits": list(self.limits),
        }

    @property
    def limits(self) -> tuple[str, ...]:
        """What this body does not do as the others do (known of built-in bodies)."""
        return LIMITS.get(self.name, ())


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
