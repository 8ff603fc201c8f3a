"""What the first job would otherwise wait for, loaded in a thread so the daemon
answers meanwhile (a job that comes first simply finds part of it done; nothing is
loaded twice: Python imports a module once, the system facts are cached).

* When its first job starts (:func:`first_job_warms_up`): the MCP SDK and the tools
  its body's channel serves (a second of imports under load), and the audit chain's
  key (the keyring's discovery: a quarter of a second), while the body's CLI boots,
  before its first tool call is audited. A daemon no job ever reaches never loads
  them.
* Once a daemon started by ``chorus start`` serves (:func:`warm_up`): that too, the
  policy's engine, the routed bodies' code (a codec's schema is hundreds of pydantic
  models) and the context's system facts (a few ``--version`` runs, cached in
  ``workspace/system.json`` for a day). A daemon started for a request on its way
  (``chorus ask`` finding none) does not: that request loads what it needs itself,
  and a warm-up beside it would only compete for the CPU.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from chorus._errors import ChorusError
from chorus.bodies import body_class
from chorus.config import ChorusConfig
from chorus.context import system_spec
from chorus.daemon._outcomes import JobStarted
from chorus.mcpserver import registered_tools
from chorus.policy import AuditLog

log = logging.getLogger("chorus.daemon")


async def warm_up(config: ChorusConfig) -> None:
    await asyncio.to_thread(_warm, config)


def _warm(config: ChorusConfig) -> None:
    _channel_sdk()
    _policy_engine()
    for name in dict.fromkeys(config.router.bodies):
        try:
            body_class(name, config)
        except (ChorusError, ImportError) as exc:  # the job will say so itself
            log.debug("warm-up: body %s not loaded: %s", name, exc)
    try:
        system_spec()
    except OSError as exc:
        log.debug("warm-up: no system facts: %s", exc)


def _channel_sdk() -> None:
    """What a body's MCP channel serves with: the SDK and the registered tools."""
    import mcp.server.mcpserver  # noqa: F401  the SDK takes a second to import

    registered_tools()


def _policy_engine() -> None:
    """The policy's engine, which the first job's gate runs (the daemon's start
    leaves it out)."""
    from chorus.policy import native_flags, native_rules, policy_callback  # noqa: F401


def first_job_warms_up(audit: AuditLog | None = None) -> Callable[[JobStarted], Awaitable[None]]:
    """A :class:`JobStarted` subscriber that, at the first job, loads the channel's
    MCP SDK and ``audit``'s key in a thread (not awaited: the job goes on meanwhile)."""
    warming: list[asyncio.Task[None]] = []

    async def started(_: JobStarted) -> None:
        if not warming:
            warming.append(asyncio.create_task(_in_thread(audit), name="first-job-warm-up"))

    return started


async def _in_thread(audit: AuditLog | None) -> None:
    try:
        await asyncio.to_thread(_channel_sdk)
    except ImportError as exc:  # the channel says so when a body connects
        log.debug("warm-up: MCP SDK not loaded: %s", exc)
    if audit is None:
        return
    try:
        await asyncio.to_thread(audit.ready)
    except ChorusError as exc:  # the first append says so itself
        log.debug("warm-up: audit key not loaded: %s", exc)
