"""One of everything across the cluster: the routine leader and the
provider health every node shares.

On a store only one daemon uses (SQLite) this daemon always leads, and health
stays in ``CHORUS_HOME/health.json``. On a shared store (PostgreSQL) the routines
run only on the node holding the ``routines`` lead (an advisory lock, see
:mod:`chorus.store._pg_lead`), and every health change is written to the
database, which every node re-reads every few seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
from collections.abc import Callable, Coroutine
from typing import Any

from chorus._errors import LimitError
from chorus.client import health_path
from chorus.client import load_health_file as load_health_file  # the supervisor's
from chorus.router import HealthBook
from chorus.store import JobRecord, JobState, Store

log = logging.getLogger("chorus.daemon")

ROUTINES_ROLE = "routines"
#: Seconds between checks of the lead (and tries to take it).
LEAD_CHECK_S = 2.0
#: Seconds between re-reads of the shared provider health.
HEALTH_REFRESH_S = 2.0


class StoreDownError(LimitError):
    """The daemon takes no new job: the shared database has been away too long."""


class RoutineLead:
    """Runs ``run`` (the routines' scheduler) only while this node leads them."""

    def __init__(
        self,
        store: Store,
        run: Callable[[], Coroutine[Any, Any, None]],
        *,
        follow: Callable[[], Coroutine[Any, Any, None]] | None = None,
        check_s: float = LEAD_CHECK_S,
    ) -> None:
        self.store = store
        self.run = run
        #: What a node that does not lead still does each check (its own jobs' chores).
        self.follow = follow
        self.check_s = check_s
        self.leading = False

    async def serve(self) -> None:
        """Forever (cancel to stop): wait for the lead, run while it lasts, repeat."""
        while True:
            if await self._holds():
                await self._lead()
            elif self.follow is not None:
                try:
                    await self.follow()
                except Exception:  # one bad round must not stop the next
                    log.exception("routine follower round failed")
            await asyncio.sleep(self.check_s)

    async def _lead(self) -> None:
        self.leading = True
        if self.store.shared:
            log.info("this node leads the cluster's routines")
        task = asyncio.create_task(self.run(), name="routines")
        try:
            while not task.done() and await self._holds():
                await asyncio.wait({task}, timeout=self.check_s)
        finally:
            self.leading = False
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if self.store.shared:
            log.warning("this node no longer leads the routines; another node fires them")

    async def _holds(self) -> bool:
        try:
            return await self.store.try_lead(ROUTINES_ROLE)
        except Exception:  # the store closing, the database away: not the leader
            log.debug("routine lead check failed", exc_info=True)
            return False

    def status(self) -> dict[str, Any]:
        return {"routines_leader": self.leading}


class SharedHealth:
    """Keeps the router's :class:`HealthBook` in step with the cluster's."""

    def __init__(self, store: Store, book: HealthBook, node: str) -> None:
        self.store = store
        self.book = book
        self.node = node

    async def load(self) -> None:
        """The current health: the cluster's (shared store) or health.json's."""
        if self.store.shared:
            with contextlib.suppress(Exception):
                self.book.load(await self.store.list_provider_health())
                return
        self.book.load(load_health_file())

    async def save(self, key: str) -> None:
        """Publish one provider's new health (and keep health.json for this node)."""
        _save_file(self.book)
        if self.store.shared:
            try:
                await self.store.put_provider_health(
                    key, self.book.get(key).to_json(), node=self.node
                )
            except Exception:  # the database away: the others learn at the next change
                log.warning("provider health of %s not shared", key, exc_info=True)

    async def follow(self, every_s: float = HEALTH_REFRESH_S) -> None:
        """Re-read the cluster's health forever (cancel to stop); nothing on SQLite."""
        if not self.store.shared:
            return
        while True:
            await asyncio.sleep(every_s)
            with contextlib.suppress(Exception):
                self.book.load(await self.store.list_provider_health())


async def nodes_status(store: Store, jobs: list[JobRecord]) -> list[dict[str, Any]]:
    """Every worker node of the store, with the jobs it runs now (for ``chorus status``)."""
    running: dict[str, list[str]] = {}
    for job in jobs:
        if job.state is JobState.RUNNING and job.node:
            running.setdefault(job.node, []).append(job.id)
    return [
        {
            "id": node.id,
            "host": node.host,
            "bodies": node.bodies,
            "last_seen": node.last_seen,
            "running": running.get(node.id, []),
        }
        for node in await store.list_nodes()
    ]


def _save_file(book: HealthBook) -> None:
    """Persist provider health atomically (write a temp file, then rename)."""
    path = health_path()
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(book.to_json()))
    os.replace(tmp, path)
