"""Everything checked before a daemon starts, so that a bad file exits 2 naming the
key at fault instead of a daemon that dies with "exit code 1"."""

from __future__ import annotations

from chorus._errors import ConfigError
from chorus.bodies import body_names
from chorus.config import ChorusConfig, load_config
from chorus.policy import load_policy
from chorus.router import check_routing


def load_checked_config() -> ChorusConfig:
    """``config.toml`` validated on its own and against the bodies and the router,
    and ``policy.toml`` loaded (made on first run); raises ``ConfigError``."""
    config = load_config()
    rc = config.router
    known = body_names(config)
    check_routing(rc.strategy, rc.bodies, rc.matrix, known)
    for body in config.budget.bodies:
        if body not in known:
            raise ConfigError(
                f"budget.bodies.{body}: unknown body; known bodies: {', '.join(known)}"
            )
    load_policy()
    return config
