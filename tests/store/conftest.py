"""Fixtures for the store tests: every contract test runs against both backends.

``store`` is parametrized: ``sqlite`` (under the per-test CHORUS_HOME) and
``postgres`` (a fresh database of the session's throwaway cluster: ``pg_url`` in
tests/conftest.py).
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest

from chorus.store import PostgresStore, Redactor, SessionRecord, SqliteStore, Store

BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]

#: ``make_store(**options)``: an unstarted store of the test's backend; calling it
#: again gives another handle on the same database (a reopen).
MakeStore = Callable[..., Store]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


@pytest.fixture
def make_store(backend: str, chorus_home: Path, request: pytest.FixtureRequest) -> MakeStore:
    url = request.getfixturevalue("pg_url") if backend == "postgres" else None

    def make(**options: Any) -> Store:
        options.setdefault("redactor", Redactor())
        if url is None:
            return SqliteStore(**options)
        return PostgresStore(url, **options)

    return make


@pytest.fixture
async def store(make_store: MakeStore) -> AsyncIterator[Store]:
    async with make_store() as opened:
        yield opened


@pytest.fixture
async def sqlite_store(chorus_home: Path) -> AsyncIterator[SqliteStore]:
    """For the tests of SQLite specifics (WAL, threads, the file itself)."""
    async with SqliteStore(redactor=Redactor()) as opened:
        yield opened


@pytest.fixture
async def session(store: Store) -> SessionRecord:
    return await store.create_session("testbody", session_id="s1", model="m1", cwd="/work")


def db_rows(store: Store, query: str) -> list[tuple[Any, ...]]:
    """Read the store's database directly, as an outside process would (call it in
    a thread: it blocks). The same plain SELECT works on both backends."""
    if isinstance(store, SqliteStore):
        conn = sqlite3.connect(store.path)
        try:
            return conn.execute(query).fetchall()
        finally:
            conn.close()
    assert isinstance(store, PostgresStore)
    with psycopg.connect(store.url) as pg:
        return pg.execute(query.encode()).fetchall()
