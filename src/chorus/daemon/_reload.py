"""``POST /reload``: the running daemon takes a changed config.toml and policy.toml.

Both files are read and checked as at start (a bad key: 400 naming it, nothing
applied). The policy applies to every turn that starts after the reload (running
turns keep the gate they started with). Settings read where they are used
(:data:`LIVE`) apply at once; the rest were wired in at start and are reported
as needing a restart (``chorus stop`` then ``chorus start``).

Agents (``[agents.<name>]``) are added, changed and removed at once: the body
registry reads the config it is given, so a new ACP agent can be asked for by
name right after the reload, and a removed one is an unknown body. A warm body
started with settings that changed (its agent's entry, the sandbox, the policy)
is closed: at once when it is idle, after its turn when it is busy; its session's
next turn starts a body with the new settings (native resume, as after an idle
close). Waiting spare bodies are closed too.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Route

from chorus._errors import ChorusError
from chorus.bodies import CLI_OF, body_names
from chorus.client._checks import load_checked_config
from chorus.config import ChorusConfig
from chorus.daemon._journal import structured
from chorus.policy import Policy, load_policy
from chorus.router import CooldownPolicy, Router

if TYPE_CHECKING:
    from chorus.daemon._supervisor import Supervisor
    from chorus.session import Session

log = logging.getLogger("chorus.daemon.reload")

#: Settings the daemon reads where it uses them: a reload applies them at once.
LIVE = (
    "router.",
    "agents.",
    "sandbox.",
    "retry.",
    "routines.",
    "worktree.",
    "budget.",
    "daemon.max_parallel_jobs",
    "daemon.max_body_restarts",
    "daemon.max_prompt_bytes",
    "daemon.worktree",
)
#: How often a busy body that must be closed is looked at again.
_POLL_S = 0.5
#: Closings that wait for a busy body's turn to end (held so they are not collected).
_WAITING: set[asyncio.Task[None]] = set()


def flat(value: Any, prefix: str = "") -> dict[str, Any]:
    """A nested settings dict as ``{"section.key": value}``."""
    if isinstance(value, dict) and value:
        out: dict[str, Any] = {}
        for key, inner in value.items():
            out.update(flat(inner, f"{prefix}{key}."))
        return out
    return {prefix.rstrip("."): value}


def changed_keys(old: ChorusConfig, new: ChorusConfig) -> list[str]:
    before, after = flat(old.model_dump(mode="json")), flat(new.model_dump(mode="json"))
    return sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))


def is_live(key: str) -> bool:
    return any(key == p or key.startswith(p) for p in LIVE if p.endswith(".")) or key in LIVE


# -- agents -------------------------------------------------------------------------------


def agent_changes(old: ChorusConfig, new: ChorusConfig) -> dict[str, list[str]]:
    """The ``[agents.<name>]`` entries added, changed and removed, by name."""
    before = {n: a.model_dump(mode="json") for n, a in old.agents.items()}
    after = {n: a.model_dump(mode="json") for n, a in new.agents.items()}
    return {
        "added": sorted(after.keys() - before.keys()),
        "changed": sorted(n for n in before.keys() & after.keys() if before[n] != after[n]),
        "removed": sorted(before.keys() - after.keys()),
    }


def bodies_of(agents: Collection[str], known: Collection[str]) -> set[str]:
    """The bodies that run under these ``[agents.<name>]`` entries."""
    return {body for body in known if CLI_OF.get(body, body) in agents}


# -- applying -----------------------------------------------------------------------------


def apply(sup: Supervisor, config: ChorusConfig, policy: Policy | None = None) -> None:
    """Make ``config`` the one the supervisor, its router and its launcher read."""
    rc = config.router
    known = body_names(config)
    sup.router = Router(
        [b for b in rc.bodies if b in known], strategy=rc.strategy, matrix=rc.matrix
    )
    sup.health.policy = CooldownPolicy(
        rc.cooldown_base_s, rc.cooldown_max_s, rc.cooldown_multiplier
    )
    sup.node.bodies = list(rc.bodies)
    sup.config = config
    sup.hub.launcher.config = config  # its body factory reads it: new agents start
    guards = sup.hub.launcher.guards
    if guards is not None:
        # The one guards object the launcher and the gateway share: swapped in place.
        object.__setattr__(guards, "policy", policy or load_policy())


def stale_bodies(sup: Supervisor, old: ChorusConfig, new: ChorusConfig, policy: Policy) -> set[str]:
    """The bodies whose warm processes would run with settings that ``new`` and
    ``policy`` change: every body for the sandbox or the policy, else the bodies of
    each agent entry changed or removed."""
    known = {*body_names(old), *body_names(new)}
    guards = sup.hub.launcher.guards
    if old.sandbox != new.sandbox or (guards is not None and guards.policy != policy):
        return known
    agents = agent_changes(old, new)
    return bodies_of({*agents["changed"], *agents["removed"]}, known)


async def retire(sup: Supervisor, bodies: Collection[str]) -> dict[str, list[str]]:
    """Close the warm bodies of ``bodies``: idle ones now, busy ones after their turn.
    Returns the session ids of each; waiting spares are closed as well."""
    closed: list[str] = []
    closing: list[str] = []
    for session in sup.hub.sessions():
        if session.body_name not in bodies or session.ended:
            continue
        if _free(sup, session):
            await sup.hub.close(session.id)
            closed.append(session.id)
        else:
            closing.append(session.id)
            _later(sup, session)
    if bodies:
        await sup.hub.spares.close()
    return {"closed": sorted(closed), "after_turn": sorted(closing)}


def _free(sup: Supervisor, session: Session) -> bool:
    return session.unused and not sup.is_busy(session.id)


def _later(sup: Supervisor, session: Session) -> None:
    task = asyncio.create_task(_close_when_free(sup, session), name=f"retire-{session.id}")
    _WAITING.add(task)
    task.add_done_callback(_WAITING.discard)


async def _close_when_free(sup: Supervisor, session: Session) -> None:
    while not session.ended:
        if _free(sup, session):
            log.info("closing session %s: its body's settings were reloaded", session.id)
            await sup.hub.close(session.id)
            return
        await asyncio.sleep(_POLL_S)


async def reload(sup: Supervisor) -> dict[str, Any]:
    """Read, check and apply; what changed, what applied, what needs a restart."""
    new = load_checked_config()  # ConfigError: nothing applied
    policy = load_policy()
    old = sup.config
    keys = changed_keys(old, new)
    stale = stale_bodies(sup, old, new, policy)
    apply(sup, new, policy)
    answer = {
        "applied": [k for k in keys if is_live(k)],
        "restart_needed": [k for k in keys if not is_live(k)],
        "policy": "reloaded",
        "agents": agent_changes(old, new),
        "bodies": await retire(sup, stale),
    }
    structured(log, logging.INFO, "config_reloaded", **answer)
    return answer


def reload_routes(sup: Supervisor) -> list[BaseRoute]:
    async def post(request: Request) -> JSONResponse:
        try:
            return JSONResponse(await reload(sup))
        except ChorusError as exc:
            return JSONResponse({"error": str(exc), "code": "bad_config"}, status_code=400)

    return [Route("/reload", post, methods=["POST"])]
