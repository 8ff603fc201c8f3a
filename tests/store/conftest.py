"""Fixtures for the store tests: every contract test runs against both backends.

``store`` is parametrized: ``sqlite`` (under the per-test CHORUS_HOME) and
``postgres`` (a fresh database in one throwaway cluster per test session, see
:class:`chorus.testing.PostgresCluster`). Without PostgreSQL installed the
``postgres`` cases skip, except under ``CHORUS_REQUIRE_AGENTS=1`` (./run test,
CI), where they fail: a skipped backend proves nothing.
"""

from __future__ import annotations

import itertools
import os
import sqlite3
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from chorus.store import PostgresStore, Redactor, SessionRecord, SqliteStore, Store
from chorus.testing import PostgresCluster, PostgresNotFoundError

BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
_databases = itertools.count(1)

#: ``make_store(**options)``: an unstarted store of the test's backend; calling it
#: again gives another handle on the same database (a reopen).
MakeStore = Callable[..., Store]


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[PostgresCluster]:
    """One PostgreSQL server for the whole test session."""
    try:
        cluster = PostgresCluster.start()
    except (PostgresNotFoundError, RuntimeError) as exc:
        if os.environ.get("CHORUS_REQUIRE_AGENTS") == "1":
            pytest.fail(f"PostgreSQL is required (CHORUS_REQUIRE_AGENTS=1): {exc}")
        pytest.skip(f"PostgreSQL not available: {exc}")
    with cluster:
        yield cluster


@pytest.fixture
def pg_url(pg_cluster: PostgresCluster) -> str:
    """The URL of a fresh, empty database."""
    return pg_cluster.create_database(f"t{next(_databases)}")


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
