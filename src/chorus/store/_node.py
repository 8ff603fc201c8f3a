"""This daemon as a worker node of the store's job queue.

The supervisor claims through :meth:`WorkerNode.claim` and runs
:meth:`WorkerNode.keep_leases` beside its scheduling loop. Every ``lease_s / 3``
the node renews its ``last_seen`` and the leases of the jobs it claimed, and
re-queues (or fails, past ``max_claims``) the jobs of nodes that stopped
renewing theirs. The same code serves both backends: on SQLite there is one
node, and a restart re-queues everything it left running; on a shared store a
restart re-queues only this node's jobs (the others belong to live nodes).

The node id is stable across restarts of one ``CHORUS_HOME`` on one host (so a
restarted daemon finds the jobs it left), and distinct for two homes on one host.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import socket
from collections.abc import Awaitable, Callable, Collection, Sequence
from pathlib import Path

from chorus.config import chorus_home
from chorus.store._interface import Store
from chorus.store._records import JOB_TERMINAL, JobRecord

log = logging.getLogger("chorus.store")


def default_node_id() -> str:
    """``<host>-<8 hex of CHORUS_HOME>``."""
    home = str(chorus_home().expanduser().resolve())
    return f"{socket.gethostname()}-{hashlib.sha256(home.encode()).hexdigest()[:8]}"


class WorkerNode:
    """Claims jobs for this daemon and keeps their leases alive."""

    def __init__(
        self,
        store: Store,
        *,
        bodies: Sequence[str],
        lease_s: float = 30.0,
        max_claims: int | None = 3,
        node_id: str | None = None,
        host: str | None = None,
        shared_paths: Sequence[str] = (),
        on_lost: Callable[[str], Awaitable[object]] | None = None,
    ) -> None:
        self.store = store
        self.id = node_id or default_node_id()
        self.host = host or socket.gethostname()
        self.bodies = list(bodies)
        self.shared_paths = [Path(p).expanduser().resolve() for p in shared_paths]
        self.lease_s = lease_s
        self.max_claims = max_claims
        #: Jobs claimed here and (as far as the last renewal knows) still held.
        self.held: set[str] = set()
        #: Called with the id of a job this node no longer holds (its lease lapsed,
        #: e.g. while the database was unreachable, and the job was re-queued or
        #: taken over by another node): stop working on it, do not end it.
        self.on_lost = on_lost

    def affinity_for(self, cwd: str | None) -> str | None:
        """The affinity of a job that runs in ``cwd``: this node's host when several
        nodes share the store and the directory is not under a shared path (it exists
        on this host only), else None (any node may run it)."""
        if not self.store.shared or cwd is None:
            return None
        path = Path(cwd).expanduser().resolve()
        if any(path.is_relative_to(shared) for shared in self.shared_paths):
            return None
        return self.host

    async def recover(self) -> list[JobRecord]:
        """At start, before claiming: register, and re-queue the jobs a previous
        run of this node left running (on SQLite: every running job)."""
        await self.store.register_node(self.id, host=self.host, bodies=self.bodies)
        return await self.store.requeue_running_jobs(node=self.id if self.store.shared else None)

    async def claim(
        self, exclude_sessions: Collection[str] = (), *, system_only: bool = False
    ) -> JobRecord | None:
        """The next job this node may run (see :meth:`Store.claim_job`), or None."""
        job = await self.store.claim_job(
            self.id,
            lease_s=self.lease_s,
            host=self.host,
            exclude_sessions=sorted(exclude_sessions),
            system_only=system_only,
        )
        if job is not None:
            self.held.add(job.id)
        return job

    async def renew(self) -> list[JobRecord]:
        """One renewal round; returns the jobs of dead nodes it re-queued or failed."""
        held = await self.store.extend_leases(self.id, sorted(self.held), lease_s=self.lease_s)
        lost = self.held - set(held)
        self.held &= set(held)
        for job_id in sorted(lost):
            await self._lost(job_id)
        await self.store.register_node(self.id, host=self.host, bodies=self.bodies)
        expired = await self.store.requeue_expired_jobs(max_attempts=self.max_claims)
        for job in expired:
            log.warning("job %s: its node stopped renewing the lease; now %s", job.id, job.state)
        return expired

    async def _lost(self, job_id: str) -> None:
        job = await self.store.get_job(job_id)
        if job.node == self.id or (job.state in JOB_TERMINAL and job.node is None):
            return  # it simply ended here
        where = f"node {job.node}" if job.node else "the queue"
        # Even ended there already: its body here may still run, and must stop.
        log.warning("job %s went back to %s (its lease here lapsed); stopping it", job_id, where)
        if self.on_lost is not None:
            await self.on_lost(job_id)

    async def keep_leases(self) -> None:
        """Renew forever (cancel to stop); a failed round is logged and retried."""
        while True:
            await asyncio.sleep(self.lease_s / 3)
            try:
                await self.renew()
            except Exception:  # a database hiccup must not end the renewals
                log.exception("node %s: lease renewal failed", self.id)
