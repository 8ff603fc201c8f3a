"""The daemon's side of flags: the desk that raises and keeps them, and
the dashboard, both run for the daemon's life next to the supervisor."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

from chorus.daemon._supervisor import Supervisor
from chorus.daemon._supervisor import _notify as notify_desktop_text
from chorus.events import Event
from chorus.flags import FlagDesk, install_desk
from chorus.policy import FlagBoard
from chorus.routines import Scheduler

log = logging.getLogger("chorus.daemon")


def flag_desk(sup: Supervisor) -> FlagDesk:
    """A desk whose decisions reach jobs through the supervisor's ``steer``."""

    async def note(job_id: str, event: Event) -> Event:
        return await sup.note(await sup.store.get_job(job_id), event)

    notify = notify_desktop_text if sup.config.daemon.notifications else None
    desk = FlagDesk(sup.store, sup.config.flags, steer=sup.steer, note=note, notify=notify)
    sup.status_hooks.append(lambda: {"pending_flags": pending_ids(desk)})
    return desk


def pending_ids(desk: FlagDesk) -> list[str]:
    """Pending flags (as of the desk's last tick) and waiting approvals."""
    return [*desk.pending_ids, *(flag.id for flag in FlagBoard().pending())]


@contextlib.asynccontextmanager
async def flags_running(
    sup: Supervisor, desk: FlagDesk, sched: Scheduler | None = None
) -> AsyncIterator[dict[str, Any]]:
    """Keep ``desk`` (deadlines, decisions) and serve the dashboard meanwhile."""
    from chorus.dashboard import dashboard_running

    install_desk(desk)
    try:
        async with contextlib.AsyncExitStack() as stack:
            await stack.enter_async_context(_ticking(desk))
            served = await stack.enter_async_context(dashboard_running(sup, desk, sched))
            yield {"dashboard": served}
    finally:
        install_desk(None)


@contextlib.asynccontextmanager
async def _ticking(desk: FlagDesk) -> AsyncIterator[None]:
    import asyncio

    task = asyncio.create_task(desk.run(), name="flags")
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
