"""Ids by unique prefix: one match resolves, none is unknown, several is ambiguous."""

from __future__ import annotations

import pytest

from chorus.store import (
    AmbiguousIdError,
    SessionRecord,
    SqliteStore,
    UnknownJobError,
    UnknownSessionError,
    resolve_job_id,
    resolve_session_id,
)


async def test_job_prefixes(store: SqliteStore, session: SessionRecord) -> None:
    # 17 random hex ids: two share a first character (pigeonhole).
    jobs = [await store.create_job(f"p{i}", session_id=session.id) for i in range(17)]
    ids = [j.id for j in jobs]
    for job_id in ids:
        assert await resolve_job_id(store, job_id) == job_id
        unique = next(n for n in range(1, 33) if sum(i.startswith(job_id[:n]) for i in ids) == 1)
        assert await resolve_job_id(store, job_id[:unique]) == job_id
    shared = next(c for c in "0123456789abcdef" if sum(i.startswith(c) for i in ids) > 1)
    with pytest.raises(AmbiguousIdError, match="matches"):
        await resolve_job_id(store, shared)
    with pytest.raises(UnknownJobError):
        await resolve_job_id(store, "zz")
    with pytest.raises(UnknownJobError):
        await resolve_job_id(store, "")


async def test_session_prefixes(store: SqliteStore, session: SessionRecord) -> None:
    assert await resolve_session_id(store, session.id[:6]) == session.id
    with pytest.raises(UnknownSessionError):
        await resolve_session_id(store, "nope")
