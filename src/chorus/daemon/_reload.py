"""``POST /reload``: the running daemon takes a changed config.toml and policy.toml.

Both files are read and checked as at start (a bad key: 400 naming it, nothing
applied). The policy applies to every turn that starts after the reload (running
turns keep the gate they started with). Settings read where they are used
(:data:`LIVE`) apply at once; the rest were wired in at start and are reported
as needing a restart (``chorus stop`` then ``chorus start``).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Route

from chorus._errors import ChorusError
from chorus.bodies import body_names
from chorus.config import ChorusConfig
from chorus.daemon._checks import load_checked_config
from chorus.daemon._journal import structured
from chorus.policy import load_policy
from chorus.router import CooldownPolicy, Router

if TYPE_CHECKING:
    from chorus.daemon._supervisor import Supervisor

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


def apply(sup: Supervisor, config: ChorusConfig) -> None:
    """Make ``config`` the one the supervisor, its router and its launcher read."""
    rc = config.router
    known = body_names(config)
    sup.router = Router(
        [b for b in rc.bodies if b in known], strategy=rc.strategy, matrix=rc.matrix
    )
    sup.health.policy = CooldownPolicy(
        rc.cooldown_base_s, rc.cooldown_max_s, rc.cooldown_multiplier
    )
    sup.config = config
    sup.hub.launcher.config = config
    guards = sup.hub.launcher.guards
    if guards is not None:
        # The one guards object the launcher and the gateway share: swapped in place.
        object.__setattr__(guards, "policy", load_policy())


async def reload(sup: Supervisor) -> dict[str, Any]:
    """Read, check and apply; what changed, what applied, what needs a restart."""
    new = load_checked_config()  # ConfigError: nothing applied
    keys = changed_keys(sup.config, new)
    apply(sup, new)
    answer = {
        "applied": [k for k in keys if is_live(k)],
        "restart_needed": [k for k in keys if not is_live(k)],
        "policy": "reloaded",
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
