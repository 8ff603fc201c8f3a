"""The store contract on both backends (appends, stamping, group commit, mirror,
sessions, raw lines, control requests) and the SQLite specifics (threads, WAL,
migrations)."""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import json
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path

import pytest

from chorus._errors import EventTooLargeError
from chorus.events import ControlRequestEvent, Event, Text, ToolCall, parse_event
from chorus.store import (
    LATEST_VERSION,
    ORIGIN_CHORUS,
    WRITER_THREAD_NAME,
    ControlAnsweredError,
    ControlStatus,
    DuplicateRecordError,
    InvalidIdError,
    Redactor,
    SchemaVersionError,
    SessionExistsError,
    SessionRecord,
    SqliteStore,
    Store,
    StoreClosedError,
    StoreQueueFullError,
    UnknownControlRequestError,
    UnknownSessionError,
)
from chorus.store._db import READER_CACHE_KIB, open_sqlite
from tests.store.conftest import MakeStore, db_rows


def text(i: int) -> Text:
    return Text(text=f"text {i}")


def texts(events: Sequence[Event]) -> list[str]:
    return [e.text for e in events if isinstance(e, Text)]


def sqlite_rows(path: Path, sql: str) -> list[tuple[object, ...]]:
    """Read the database directly, as an outside process would (test thread only)."""
    conn = sqlite3.connect(path)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


# -- appends ------------------------------------------------------------------------


async def test_concurrent_appends_get_gap_free_seqs(store: Store, session: SessionRecord) -> None:
    stamped = await asyncio.gather(*(store.append(session.id, text(i)) for i in range(200)))
    assert sorted(e.seq for e in stamped) == list(range(1, 201))
    assert {e.session_id for e in stamped} == {session.id}
    assert {e.body for e in stamped} == {"testbody"}  # filled from the session row
    logged = await store.read_events(session.id)
    assert [e.seq for e in logged] == list(range(1, 201))
    assert await store.last_seq(session.id) == 200


async def test_append_nowait_stamps_in_call_order(store: Store, session: SessionRecord) -> None:
    futures = [store.append_nowait(session.id, text(i)) for i in range(300)]
    stamped = await asyncio.gather(*futures)
    assert [e.seq for e in stamped] == list(range(1, 301))
    assert texts(stamped) == [f"text {i}" for i in range(300)]


async def test_a_cancelled_append_is_still_written(store: Store, session: SessionRecord) -> None:
    task = asyncio.create_task(store.append(session.id, text(1)))
    await asyncio.sleep(0)  # the append is queued
    task.cancel()
    await store.append(session.id, text(2))  # FIFO: the first one is committed by now
    assert texts(await store.read_events(session.id)) == ["text 1", "text 2"]


async def test_append_returns_the_event_as_stored(store: Store, session: SessionRecord) -> None:
    event = ToolCall(call_id="c1", tool="shell", native_tool="Bash", input={"cmd": "ls"})
    stamped = await store.append(session.id, event)
    assert stamped.model_copy(update={"session_id": "", "seq": 0, "body": ""}) == event
    assert await store.read_events(session.id) == [stamped]


async def test_a_failing_append_fails_alone_in_its_batch(
    store: Store, session: SessionRecord
) -> None:
    results = await asyncio.gather(
        store.append(session.id, text(1)),
        store.append("nope", text(2)),
        store.append(session.id, text(3)),
        return_exceptions=True,
    )
    assert isinstance(results[1], UnknownSessionError)
    assert texts(await store.read_events(session.id)) == ["text 1", "text 3"]


async def test_append_many_is_all_or_nothing(make_store: MakeStore) -> None:
    async with make_store(max_event_bytes=2000) as store:
        sid = (await store.create_session("b")).id
        with pytest.raises(EventTooLargeError):
            await store.append_many(sid, [text(1), Text(text="x" * 5000)])
        assert await store.last_seq(sid) == 0
        stamped = await store.append_many(sid, [text(1), text(2)])
        assert [e.seq for e in stamped] == [1, 2]


async def test_origin_is_recorded_and_filterable(store: Store, session: SessionRecord) -> None:
    await store.append(session.id, text(1))
    request = ControlRequestEvent(request_id="r1", subtype="interrupt")
    await store.append(session.id, request, origin=ORIGIN_CHORUS)
    assert [e.type for e in await store.read_events(session.id, origin="codec")] == ["text"]
    assert [e.seq for e in await store.read_events(session.id, origin=ORIGIN_CHORUS)] == [2]
    assert [e.seq for e in await store.read_events(session.id, from_seq=2)] == [2]


async def test_sequence_continues_after_reopen(make_store: MakeStore) -> None:
    async with make_store() as store:
        sid = (await store.create_session("b")).id
        await store.append_many(sid, [text(1), text(2)])
    async with make_store() as store:
        assert (await store.append(sid, text(3))).seq == 3


# -- threads, queue, lifecycle --------------------------------------------------------


async def test_no_sqlite_call_runs_on_the_event_loop_thread(chorus_home: Path) -> None:
    calls: list[tuple[int, str, str]] = []

    def trace(statement: str) -> None:
        thread = threading.current_thread()
        calls.append((thread.ident or 0, thread.name, statement))

    async with SqliteStore(redactor=Redactor(), sql_trace=trace) as store:
        sid = (await store.create_session("b")).id
        await asyncio.gather(*(store.append(sid, text(i)) for i in range(20)))
        await store.append_raw(sid, "stdout", "{}")
        job = await store.create_job("do it")
        await store.claim_next_job()
        await store.update_job(job.id, result={"ok": True})
        await store.list_sessions()
        await store.read_events(sid)
        sub = await store.subscribe(sid, from_seq=1)
        assert (await anext(sub)).seq == 1
        await sub.aclose()
    loop_thread = threading.get_ident()
    assert calls, "the trace hook saw no statements"
    assert all(ident != loop_thread for ident, _, _ in calls)
    writers = {
        name for _, name, sql in calls if sql.lstrip().upper().startswith(("INSERT", "UPDATE"))
    }
    assert writers == {WRITER_THREAD_NAME}


async def test_full_writer_queue_raises_a_named_error(make_store: MakeStore) -> None:
    async with make_store(max_queue=1) as store:
        sid = (await store.create_session("b")).id

        def flood() -> None:
            # record_raw enqueues without yielding, so the writer cannot keep up.
            for i in range(100_000):
                store.record_raw(sid, "stdout", f"line {i}")

        with pytest.raises(StoreQueueFullError) as caught:
            flood()
        assert caught.value.limit == 1


async def test_a_closed_store_refuses_work(make_store: MakeStore) -> None:
    store = make_store()
    with pytest.raises(StoreClosedError):
        await store.list_sessions()
    await store.start()
    sid = (await store.create_session("b")).id
    await store.close()
    await store.close()  # idempotent
    with pytest.raises(StoreClosedError):
        await store.append(sid, text(1))
    with pytest.raises(StoreClosedError):
        store.record_raw(sid, "stdout", "x")


# -- schema ------------------------------------------------------------------------------


async def test_database_is_wal_with_recorded_migrations(sqlite_store: SqliteStore) -> None:
    store = sqlite_store
    assert await store.integrity_check() == ["ok"]
    mode = await asyncio.to_thread(sqlite_rows, store.path, "PRAGMA journal_mode")
    assert mode == [("wal",)]
    versions = await asyncio.to_thread(
        sqlite_rows, store.path, "SELECT version FROM schema_version"
    )
    assert versions == [(v,) for v in range(1, LATEST_VERSION + 1)]


def sqlite_memory_kib() -> int:
    """What SQLite itself holds now (its page caches above all), KiB."""
    lib = ctypes.CDLL(ctypes.util.find_library("sqlite3") or "libsqlite3.so.0")
    lib.sqlite3_memory_used.restype = ctypes.c_int64
    return int(lib.sqlite3_memory_used()) // 1024


async def test_a_reader_keeps_a_bounded_page_cache(sqlite_store: SqliteStore) -> None:
    store = sqlite_store
    sid = (await store.create_session("b")).id
    for _ in range(6):  # a log of over 3 MB
        await store.append_many(sid, [Text(text=f"{i} " + "x" * 1000) for i in range(500)])
    before = sqlite_memory_kib()
    for _ in range(4):
        assert len(await store.read_events(sid)) == 3000
    readers = list(store._reader_dbs)  # each read may have run on another reader
    assert readers
    grown = sqlite_memory_kib() - before
    assert grown < len(readers) * (READER_CACHE_KIB + 256)  # not the default 2 MB each
    for db in readers:
        assert db.conn.execute("PRAGMA cache_size").fetchone() == (-READER_CACHE_KIB,)


def test_opening_waits_for_another_opener_switching_to_wal(tmp_path: Path) -> None:
    """SQLite refuses the switch to WAL at once, busy timeout or not, while another
    process holds the file's write lock: two stores opened together on a new file
    (the daemon and a command) must not fail for it."""
    path = tmp_path / "new.db"
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")
    threading.Timer(0.3, other.execute, ("ROLLBACK",)).start()
    db = open_sqlite(path, writer=True)
    try:
        assert db.conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    finally:
        db.close()
        other.close()


async def test_a_newer_schema_is_refused(chorus_home: Path) -> None:
    async with SqliteStore(redactor=Redactor()) as store:
        path = store.path

    def bump() -> None:
        conn = sqlite3.connect(path)
        with conn:
            conn.execute("INSERT INTO schema_version VALUES (99, 'future', 0)")
        conn.close()

    await asyncio.to_thread(bump)
    with pytest.raises(SchemaVersionError) as caught:
        await SqliteStore(path, redactor=Redactor()).start()
    assert caught.value.found == 99


# -- mirror ----------------------------------------------------------------------------


async def test_mirror_holds_the_stored_json(store: Store, session: SessionRecord) -> None:
    await asyncio.gather(*(store.append(session.id, text(i)) for i in range(50)))
    assert store.mirror is not None
    mirror = store.mirror.path(session.id)
    lines = mirror.read_text(encoding="utf-8").splitlines()
    payloads = await asyncio.to_thread(db_rows, store, "SELECT payload FROM events ORDER BY seq")
    assert lines == [p for (p,) in payloads]
    assert [parse_event(line).seq for line in lines] == list(range(1, 51))
    assert mirror.stat().st_mode & 0o777 == 0o600


async def test_rebuild_mirror_restores_a_short_file(store: Store, session: SessionRecord) -> None:
    await store.append_many(session.id, [text(i) for i in range(5)])
    assert store.mirror is not None
    mirror = store.mirror.path(session.id)
    full = mirror.read_bytes()
    mirror.write_bytes(full[: len(full) // 2])  # as a crash between commit and mirror could
    await store.rebuild_mirror(session.id)
    assert mirror.read_bytes() == full


# -- sessions ----------------------------------------------------------------------------


async def test_session_lifecycle(store: Store) -> None:
    created = await store.create_session(
        "claude", session_id="abc", model="opus", cwd="/w", transport={"pid": 42}
    )
    assert (created.state, created.last_seq, created.transport) == ("created", 0, {"pid": 42})
    await store.append(created.id, text(1))
    updated = await store.update_session("abc", state="running", native_session_id="n-1")
    assert (updated.state, updated.native_session_id, updated.model) == ("running", "n-1", "opus")
    assert updated.last_seq == 1
    assert updated.updated_at >= created.updated_at
    assert await store.get_session("abc") == updated


async def test_session_errors(store: Store, session: SessionRecord) -> None:
    with pytest.raises(SessionExistsError):
        await store.create_session("b", session_id=session.id)
    with pytest.raises(InvalidIdError):
        await store.create_session("b", session_id="../etc")
    with pytest.raises(UnknownSessionError):
        await store.get_session("nope")
    with pytest.raises(UnknownSessionError):
        await store.update_session("nope", state="x")


async def test_list_sessions_newest_first_with_filters(store: Store) -> None:
    for name, body in (("a", "claude"), ("b", "codex"), ("c", "claude")):
        await store.create_session(body, session_id=name)
    await store.update_session("a", state="ended")
    assert [s.id for s in await store.list_sessions()] == ["c", "b", "a"]
    assert [s.id for s in await store.list_sessions(body="claude")] == ["c", "a"]
    assert [s.id for s in await store.list_sessions(state="ended")] == ["a"]
    assert [s.id for s in await store.list_sessions(limit=1)] == ["c"]


# -- raw lines ----------------------------------------------------------------------------


async def test_raw_lines_are_numbered_per_session(store: Store, session: SessionRecord) -> None:
    tap = store.raw_tap(session.id)
    tap("stdin", '{"type":"user"}')
    tap("stdout", '{"type":"assistant"}')
    tap("bogus", "ignored: not a stream")
    n = await store.append_raw(session.id, "stderr", "warning")  # FIFO: the tap's lines are in
    assert n == 3
    lines = await store.read_raw(session.id)
    assert [(r.n, r.stream) for r in lines] == [(1, "stdin"), (2, "stdout"), (3, "stderr")]
    only_out = await store.read_raw(session.id, streams=["stdout"])
    assert [r.line for r in only_out] == ['{"type":"assistant"}']


async def test_a_failed_fire_and_forget_raw_line_is_logged(
    store: Store, session: SessionRecord, caplog: pytest.LogCaptureFixture
) -> None:
    store.record_raw("nope", "stdout", "lost line")
    await store.append_raw(session.id, "stdout", "flush")  # FIFO: the first is done
    assert "raw stdout line of session nope not recorded: unknown session 'nope'" in caplog.text


# -- control requests ------------------------------------------------------------------------


async def test_control_request_gets_exactly_one_response(
    store: Store, session: SessionRecord
) -> None:
    pending = await store.record_control_request(session.id, "r1", "set_model", {"model": "x"})
    assert (pending.status, pending.response) == (ControlStatus.PENDING, None)
    answered = await store.record_control_response(
        session.id, "r1", status=ControlStatus.OK, response={"model": "x"}
    )
    assert answered.status is ControlStatus.OK
    assert answered.responded_at is not None
    with pytest.raises(ControlAnsweredError):
        await store.record_control_response(session.id, "r1", status=ControlStatus.ERROR)
    with pytest.raises(DuplicateRecordError):
        await store.record_control_request(session.id, "r1", "interrupt")
    with pytest.raises(UnknownControlRequestError):
        await store.record_control_response(session.id, "r9", status=ControlStatus.OK)
    with pytest.raises(UnknownSessionError):
        await store.record_control_request("nope", "r1", "interrupt")
    await store.record_control_request(session.id, "r2", "interrupt")
    pending_now = await store.list_control_requests(session.id, status=ControlStatus.PENDING)
    assert [r.request_id for r in pending_now] == ["r2"]
    assert await store.get_control_request(session.id, "r1") == answered


async def test_record_fields_are_stored_as_json(store: Store) -> None:
    await store.create_session("b", session_id="j", transport={"argv": ["claude", "-p"]})
    rows = await asyncio.to_thread(db_rows, store, "SELECT transport FROM sessions")
    assert json.loads(str(rows[0][0])) == {"argv": ["claude", "-p"]}
