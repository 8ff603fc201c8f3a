"""What the first job would otherwise wait for, done once the daemon serves: the
routed bodies' code (a codec's schema is hundreds of pydantic models: seconds to
import under load) and the context's system facts (a few ``--version`` runs, cached
in ``workspace/system.json`` for a day). In a thread, so the daemon answers meanwhile;
a job that comes first simply finds part of it done."""

from __future__ import annotations

import asyncio
import logging

from chorus._errors import ChorusError
from chorus.bodies import body_class
from chorus.config import ChorusConfig
from chorus.context import system_spec

log = logging.getLogger("chorus.daemon")


async def warm_up(config: ChorusConfig) -> None:
    await asyncio.to_thread(_warm, config)


def _warm(config: ChorusConfig) -> None:
    for name in dict.fromkeys(config.router.bodies):
        try:
            body_class(name, config)
        except (ChorusError, ImportError) as exc:  # the job will say so itself
            log.debug("warm-up: body %s not loaded: %s", name, exc)
    try:
        system_spec()
    except OSError as exc:
        log.debug("warm-up: no system facts: %s", exc)
