"""Worker nodes and job leases (the database's clock: one clock for every node), and
the provider health a cluster shares."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

from chorus.store._jobs import (
    JOB_COLUMNS,
    JOB_SELECT,
    JOBS_CHANNEL,
    get_job,
    job_record,
    set_job_state,
    update_job_row,
)
from chorus.store._query import Query, count, notify, one, rows, values
from chorus.store._records import (
    JobRecord,
    JobState,
    JsonDict,
    NodeRecord,
    lease_expired_error,
)
from chorus.store._repo import Repo

_UPSERT_NODE = (
    "INSERT INTO nodes (id, host, bodies, started_at, last_seen)"
    " VALUES (:id, :host, :bodies, {now}, {now}) ON CONFLICT (id) DO UPDATE"
    " SET host = excluded.host, bodies = excluded.bodies, last_seen = excluded.last_seen"
)
_NODES = (
    "SELECT n.id, n.host, n.bodies, n.started_at, n.last_seen,"
    " (SELECT COUNT(*) FROM jobs j WHERE j.node = n.id AND j.state = 'running') FROM nodes n"
    " ORDER BY n.last_seen DESC, n.id"
)
#: Take the oldest queued job a node may run (see :meth:`Store.claim_job`), in one
#: statement; on PostgreSQL SKIP LOCKED passes over the rows others are taking.
_CLAIM = (
    "UPDATE jobs SET state = 'running', attempts = attempts + 1, started_at = :now,"
    " ended_at = NULL, updated_at = :now, node = :node, lease_expires_at = {now} + :lease"
    " WHERE state = 'queued' AND id = (SELECT id FROM jobs j WHERE state = 'queued'"
    " AND (affinity IS NULL OR affinity = :node OR affinity = CAST(:host AS TEXT))"
    " AND COALESCE(session_id, '') NOT IN (JSON_ITEMS(:exclude))"
    " AND (NOT :system_only OR {system_only})"
    " AND (session_id IS NULL OR NOT EXISTS (SELECT 1 FROM jobs r"
    " WHERE r.session_id = j.session_id AND r.state = 'running'))"
    " ORDER BY created_at, {ord} LIMIT 1{skip_locked})"
    f" RETURNING {', '.join(JOB_COLUMNS)}"
)
_SEEN = "UPDATE nodes SET last_seen = {now} WHERE id = :node"
_EXTEND = (
    "UPDATE jobs SET lease_expires_at = {now} + :lease WHERE node = :node"
    " AND state = 'running' AND id IN (JSON_ITEMS(:ids)) RETURNING id"
)
_EXPIRED = (
    JOB_SELECT + " WHERE state = 'running' AND lease_expires_at < {now}"
    " ORDER BY created_at, {ord}{skip_locked}"
)


class Nodes(Repo):
    """The worker-node and lease part of :class:`~chorus.store.Store`."""

    async def register_node(self, node_id: str, *, host: str, bodies: Sequence[str]) -> NodeRecord:
        """Insert or refresh a worker node (``last_seen`` now)."""
        row = {"id": node_id, "host": host, "bodies": json.dumps(list(bodies))}
        return await self._call(lambda: _register(row))

    async def list_nodes(self) -> list[NodeRecord]:
        """Every registered node, most recently seen first."""
        return await self._read(_list_nodes)

    async def claim_job(
        self,
        node_id: str,
        *,
        lease_s: float,
        host: str | None = None,
        exclude_sessions: Sequence[str] = (),
        system_only: bool = False,
    ) -> JobRecord | None:
        """Atomically take the oldest ``queued`` job this node may run: not of a
        session in ``exclude_sessions`` (``""`` stands for "no session") nor of one
        with a job running anywhere, with no affinity or one naming ``node_id`` or
        ``host``, and (``system_only``) with ``options["system"]`` true. It becomes
        ``running`` on ``node_id`` with a lease of ``lease_s`` seconds. None when
        nothing fits. Concurrent claims, from any
        number of processes, never get the same job."""
        params: dict[str, Any] = {"node": node_id, "host": host, "lease": lease_s}
        params.update(exclude=json.dumps(list(exclude_sessions)), system_only=system_only)
        params["now"] = time.time()
        return await self._call(lambda: _claim(params))

    async def extend_leases(
        self, node_id: str, job_ids: Sequence[str], *, lease_s: float
    ) -> list[str]:
        """Renew the leases of the node's running jobs among ``job_ids`` and the
        node's ``last_seen``; return the ids still held (a job missing from the
        answer was taken over after its lease expired: stop working on it)."""
        params = {"node": node_id, "ids": json.dumps(list(job_ids)), "lease": lease_s}
        return await self._call(lambda: _extend(params))

    async def requeue_expired_jobs(self, *, max_attempts: int | None = None) -> list[JobRecord]:
        """Put ``running`` jobs whose lease expired back to ``queued`` (their node
        died), or to ``failed`` once they were claimed ``max_attempts`` times;
        return them in their new state."""
        jobs = await self._call(lambda: _requeue_expired(max_attempts))
        if any(job.state is JobState.QUEUED for job in jobs):
            self._jobs_queued()
        return jobs


def _node(row: Sequence[Any]) -> NodeRecord:
    return NodeRecord(
        id=row[0],
        host=row[1],
        bodies=json.loads(row[2]),
        started_at=row[3],
        last_seen=row[4],
        running=row[5],
    )


def _list_nodes() -> Query[list[NodeRecord]]:
    return [_node(row) for row in (yield from rows(_NODES))]


def _register(row: dict[str, Any]) -> Query[NodeRecord]:
    yield from count(_UPSERT_NODE, row)
    return next(n for n in (yield from _list_nodes()) if n.id == row["id"])


def _claim(params: dict[str, Any]) -> Query[JobRecord | None]:
    row = yield from one(_CLAIM, params)
    return None if row is None else job_record(row)


def _extend(params: dict[str, Any]) -> Query[list[str]]:
    yield from count(_SEEN, params)
    return sorted((yield from values(rows(_EXTEND, params))))


def _requeue_expired(max_attempts: int | None) -> Query[list[JobRecord]]:
    expired = [job_record(row) for row in (yield from rows(_EXPIRED))]
    jobs = []
    for job in expired:
        jobs.append((yield from _expire(job, max_attempts)))
    if any(job.state is JobState.QUEUED for job in jobs):
        yield from notify(JOBS_CHANNEL)
    return jobs


def _expire(job: JobRecord, max_attempts: int | None) -> Query[JobRecord]:
    """A running job whose node stopped renewing its lease: queue it again, or
    fail it once it has been claimed ``max_attempts`` times."""
    if max_attempts is not None and job.attempts >= max_attempts:
        yield from set_job_state(job, JobState.FAILED)
        yield from update_job_row(job.id, {"error": json.dumps(lease_expired_error(job))})
        return (yield from get_job(job.id))
    return (yield from set_job_state(job, JobState.QUEUED))


# -- provider health, shared by a cluster (a store of one daemon shares none) ------------------

_HEALTH = "SELECT data FROM provider_health ORDER BY key"
_PUT_HEALTH = (
    "INSERT INTO provider_health (key, data, node, updated_at) VALUES (:key, :data, :node, :now)"
    " ON CONFLICT (key) DO UPDATE SET data = excluded.data, node = excluded.node,"
    " updated_at = excluded.updated_at"
)


class SharedHealth(Repo):
    """Provider health rows of the whole cluster (the last writer wins)."""

    async def list_provider_health(self) -> list[JsonDict]:
        """Provider health rows (:meth:`chorus.router.ProviderHealth.to_json`) shared by
        the cluster; a store that only one daemon uses shares none."""
        found = await self._read(lambda: values(rows(_HEALTH)))
        return [json.loads(data) for data in found]

    async def put_provider_health(self, key: str, data: JsonDict, *, node: str) -> None:
        """Store one provider's health for the whole cluster (the last writer wins)."""
        row = {"key": key, "data": self._json(data), "node": node, "now": time.time()}
        await self._call(lambda: count(_PUT_HEALTH, row))
