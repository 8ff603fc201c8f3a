"""Ids by unique prefix: people type ``a78e`` rather than 32 hex characters."""

from __future__ import annotations

from chorus.store._errors import (
    AmbiguousIdError,
    UnknownJobError,
    UnknownRecordError,
    UnknownSessionError,
)
from chorus.store._interface import Store

#: Sessions searched for a prefix (newest first): older ones need their full id.
PREFIX_SEARCH_LIMIT = 100_000


async def resolve_job_id(store: Store, raw: str) -> str:
    """The full id of the one job whose id is or starts with ``raw``."""
    try:
        return (await store.get_job(raw)).id
    except UnknownRecordError:
        pass
    ids = [j.id for j in await store.list_jobs() if raw and j.id.startswith(raw)]
    return _one(ids, raw, "job", UnknownJobError(raw))


async def resolve_session_id(store: Store, raw: str) -> str:
    """The full id of the one session whose id is or starts with ``raw``."""
    try:
        return (await store.get_session(raw)).id
    except UnknownRecordError:
        pass
    sessions = await store.list_sessions(limit=PREFIX_SEARCH_LIMIT)
    ids = [s.id for s in sessions if raw and s.id.startswith(raw)]
    return _one(ids, raw, "session", UnknownSessionError(raw))


def _one(ids: list[str], raw: str, what: str, unknown: UnknownRecordError) -> str:
    if len(ids) == 1:
        return ids[0]
    if not ids:
        raise unknown
    shown = ", ".join(i[: len(raw) + 4] for i in ids[:5])
    raise AmbiguousIdError(f"{what} prefix {raw!r} matches {len(ids)} {what}s ({shown}…)")
