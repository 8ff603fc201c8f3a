"""Reading the log while no daemon runs: the read-only commands never start one."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any


def stored_jobs(state: str | None) -> list[dict[str, Any]]:
    """Jobs as the daemon's ``GET /jobs`` would list them, read from the store."""
    from chorus._errors import UserError
    from chorus.store import JobState, SqliteStore, default_db_path

    if not default_db_path().exists():
        return []
    try:
        wanted = JobState(state) if state else None
    except ValueError:
        raise UserError(f"unknown state {state!r}") from None

    async def read() -> list[dict[str, Any]]:
        async with SqliteStore() as store:
            rows = await store.list_jobs(state=wanted)
        return [{**dataclasses.asdict(j), "state": str(j.state), **_left(j.result)} for j in rows]

    return asyncio.run(read())


def _left(result: dict[str, Any] | None) -> dict[str, Any]:
    """The bodies a job left on failover (kept with its result), as ``GET /jobs`` says."""
    left = (result or {}).get("failed_over_from")
    return {"failed_over_from": left if isinstance(left, list) else []}


def offline_status() -> dict[str, Any]:
    """What ``status`` can tell with no daemon, read from the config and the log: the
    configured bodies, their last known health and cooldowns, and the job counts."""
    from chorus.agents import find_login
    from chorus.client import load_health_file
    from chorus.config import load_config

    config = load_config()
    counts: dict[str, int] = {}
    for job in stored_jobs(None):
        counts[job["state"]] = counts.get(job["state"], 0) + 1
    configured = [
        *config.router.bodies,
        *(n for n in config.agents if n not in config.router.bodies),
    ]
    logins = {b: find_login(b, a.env if (a := config.agents.get(b)) else {}) for b in configured}
    return {
        "daemon": "not running",
        "source": "log",
        "jobs": counts,
        "router_bodies": configured,
        "health": load_health_file(),
        "needs_login": {b: login.describe() for b, login in logins.items() if not login.usable},
    }


def stored_events(job_id: str) -> list[str]:
    """A job's events as JSON text, read from the store; a unique prefix will do."""
    from chorus.events import event_to_json
    from chorus.store import SqliteStore, default_db_path, resolve_job_id

    if not default_db_path().exists():
        raise _unknown(job_id)

    async def read() -> list[str]:
        async with SqliteStore() as store:
            job = await store.get_job(await resolve_job_id(store, job_id))
            events = await store.read_events(job.session_id or "", from_seq=1)
        return [event_to_json(e) for e in events if e.job_id == job.id]

    return asyncio.run(read())


def _unknown(job_id: str) -> Exception:
    from chorus._errors import UserError

    return UserError(f"unknown job {job_id!r}")


def stored_sessions(limit: int) -> list[dict[str, Any]]:
    """Sessions as ``GET /sessions`` lists them, newest first, read from the store
    (SQLite under CHORUS_HOME or the ``[store] url`` database)."""
    from chorus.store import open_store

    async def read() -> list[dict[str, Any]]:
        async with open_store() as store:
            rows = await store.list_sessions(limit=limit)
        return [
            {**dataclasses.asdict(s), "active_body": _active(s.transport, s.body)} for s in rows
        ]

    return asyncio.run(read())


def _active(transport: dict[str, Any], body: str) -> str:
    """The body a session runs on now (``GET /sessions``'s ``active_body``)."""
    active = transport.get("active_body")
    return active if isinstance(active, str) else body
