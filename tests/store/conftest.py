"""Fixtures for the store tests: an open store under the per-test CHORUS_HOME."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from chorus.store import Redactor, SessionRecord, SqliteStore


@pytest.fixture
async def store(chorus_home: Path) -> AsyncIterator[SqliteStore]:
    async with SqliteStore(redactor=Redactor()) as opened:
        yield opened


@pytest.fixture
async def session(store: SqliteStore) -> SessionRecord:
    return await store.create_session("testbody", session_id="s1", model="m1", cwd="/work")
