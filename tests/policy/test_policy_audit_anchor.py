"""The audit log's anchor in the store: deleting both audit files, rolling both back to
an older copy, or truncating the log no longer verifies as ``ok``; a healthy log (also
after ``repair`` and ``migrate``) still does. On SQLite and on PostgreSQL."""

from __future__ import annotations

import asyncio
import json
import shutil
import threading
import time
from pathlib import Path

import pytest

from chorus.policy import AuditLog
from chorus.policy._anchor import anchor_key
from chorus.policy._audit import GENESIS, entry_hash
from chorus.store import (
    AuditAnchor,
    PgAnchorCell,
    PostgresStore,
    SqliteAnchorCell,
    default_db_path,
)


def filled(n: int, log: AuditLog | None = None) -> AuditLog:
    log = log or AuditLog()
    for i in range(n):
        log.append("tool_call", {"i": i}, session_id="s")
    return log


def snapshot(log: AuditLog, into: Path) -> None:
    into.mkdir()
    shutil.copy2(log.path, into / "audit.jsonl")
    shutil.copy2(log.head_path, into / "head.json")


def restore(log: AuditLog, copy: Path) -> None:
    shutil.copy2(copy / "audit.jsonl", log.path)
    shutil.copy2(copy / "head.json", log.head_path)


def stored(log: AuditLog) -> AuditAnchor | None:
    assert log.anchor is not None
    return log.anchor.load()


def test_a_healthy_log_verifies_and_the_store_holds_where_it_ends() -> None:
    log = filled(5)
    assert log.verify().ok
    anchor = stored(log)
    assert anchor is not None
    last = list(log.entries())[-1]
    assert (anchor.entries, anchor.head_hash) == (5, last.hash)
    assert anchor.end_offset == log.path.stat().st_size
    assert default_db_path().exists()  # the store, not the audit folder


def test_deleting_both_audit_files_fails_verify() -> None:
    log = filled(4)
    log.verify()
    log.path.unlink()
    log.head_path.unlink()
    result = AuditLog().verify()  # a fresh reader: nothing in memory helps it
    assert not result.ok
    assert "the log was deleted" in result.problem
    assert "held 4 entries" in result.problem


def test_rolling_both_files_back_to_an_older_copy_fails_verify(tmp_path: Path) -> None:
    log = filled(3)
    snapshot(log, tmp_path / "old")
    filled(4, log)
    assert log.verify().ok
    restore(log, tmp_path / "old")
    # The older copy is a genuine, signed, self-consistent log: only the anchor knows.
    assert AuditLog(anchor=False).verify().ok
    result = AuditLog().verify()
    assert not result.ok
    assert "holds 3 entries" in result.problem
    assert "rolled back to an older copy" in result.problem
    assert result.seq == 3


def test_truncating_the_log_fails_verify(tmp_path: Path) -> None:
    log = filled(2)
    saved_head = log.head_path.read_bytes()  # signed, for entry 1
    filled(4, log)
    log.verify()
    lines = log.path.read_bytes().splitlines(keepends=True)
    # Cut in place back to two entries, with the head those two once had.
    with log.path.open("r+b") as handle:
        handle.truncate(len(b"".join(lines[:2])))
    log.head_path.write_bytes(saved_head)
    assert AuditLog(anchor=False).verify().ok  # the files agree with each other
    result = AuditLog().verify()
    assert not result.ok
    assert "holds 2 entries" in result.problem
    # Cut to nothing, and the head removed.
    log.path.write_bytes(b"")
    log.head_path.unlink()
    assert AuditLog(anchor=False).verify().ok
    assert "the log was deleted" in AuditLog().verify().problem


def test_appends_after_a_rollback_do_not_move_the_anchor(tmp_path: Path) -> None:
    """A daemon that keeps appending to a rolled-back log must not launder it: the
    anchor stays, and once the log is longer again it names another entry."""
    log = filled(3)
    snapshot(log, tmp_path / "old")
    filled(3, log)
    log.verify()
    restore(log, tmp_path / "old")
    filled(5, log)  # the same AuditLog object, as a running daemon would
    result = AuditLog().verify()
    assert not result.ok
    assert "entry 5 is not the one the store's audit anchor names" in result.problem
    anchor = stored(AuditLog())
    assert anchor is not None
    assert anchor.entries == 6


def test_a_log_from_before_anchors_is_anchored_by_its_first_verify() -> None:
    log = filled(3, AuditLog(anchor=False))
    reader = AuditLog()
    assert stored(reader) is None
    assert reader.verify().ok
    assert stored(reader) is not None
    log.path.unlink()
    log.head_path.unlink()
    assert "deleted" in AuditLog().verify().problem


def test_a_forged_anchor_row_is_found() -> None:
    log = filled(2)
    log.verify()
    cell = SqliteAnchorCell()
    anchor = cell.load(anchor_key(log.path))
    assert anchor is not None
    forged = AuditAnchor(anchor.log, 1, GENESIS, 0, "0" * 64, anchor.updated_at)
    assert cell.advance(forged, expected=anchor.entries)
    result = AuditLog().verify()
    assert not result.ok
    assert "not signed with this home's audit key" in result.problem


def test_a_repaired_torn_line_still_verifies() -> None:
    log = filled(3)
    with log.path.open("a") as handle:
        handle.write('{"seq": 3, "ts": 1.0, "kind": "tool')  # a crash mid-write
    assert log.repair().repaired
    result = AuditLog().verify()
    assert result.ok, result.problem
    assert result.entries == 4  # the three, and the repair's own entry
    anchor = stored(log)
    assert anchor is not None
    assert anchor.entries == 4


def _legacy_log(path: Path, n: int) -> str:
    prev, lines = GENESIS, []
    for seq in range(n):
        fields = {"seq": seq, "ts": 1.0, "kind": "tool_call", "session_id": None}
        fields |= {"data": {"i": seq}, "prev": prev}
        prev = entry_hash(fields)
        lines.append(json.dumps({**fields, "hash": prev}) + "\n")
    path.write_text("".join(lines))
    return prev


def test_migrate_on_a_fresh_home_anchors_the_sealed_log() -> None:
    log = AuditLog()
    log.path.parent.mkdir(parents=True)
    last = _legacy_log(log.path, 3)
    log.head_path.write_text(json.dumps({"seq": 2, "hash": last}))
    assert log.migrate().migrated
    assert AuditLog().verify().ok
    anchor = stored(log)
    assert anchor is not None
    assert anchor.entries == 4
    log.path.unlink()
    log.head_path.unlink()
    assert "deleted" in AuditLog().verify().problem


@pytest.mark.postgres
def test_the_anchor_in_postgresql_catches_a_rollback(pg_url: str, tmp_path: Path) -> None:
    async def migrate() -> None:
        async with PostgresStore(pg_url):
            pass

    asyncio.run(migrate())
    cell = PgAnchorCell(pg_url)
    log = filled(2, AuditLog(anchor=cell))
    snapshot(log, tmp_path / "old")
    filled(2, log)
    assert AuditLog(anchor=cell).verify().ok
    anchor = cell.load(anchor_key(log.path))
    assert anchor is not None
    assert anchor.entries == 4
    assert not cell.advance(anchor, expected=3)  # compare-and-set on the count
    restore(log, tmp_path / "old")
    result = AuditLog(anchor=PgAnchorCell(pg_url)).verify()
    assert not result.ok
    assert "rolled back" in result.problem
    log.path.unlink()
    log.head_path.unlink()
    assert "deleted" in AuditLog(anchor=PgAnchorCell(pg_url)).verify().problem


def test_reanchor_refuses_a_log_that_fails_its_own_checks(tmp_path: Path) -> None:
    log = filled(3)
    snapshot(log, tmp_path / "old")
    filled(2, log)
    log.verify()
    restore(log, tmp_path / "old")
    lines = log.path.read_text().splitlines(keepends=True)
    log.path.write_text(lines[0] + lines[2])  # an entry dropped from the middle too
    before = log.path.read_bytes()
    result = AuditLog().reanchor()
    assert result.status == "broken"
    assert "entry 1 is missing" in result.problem
    assert log.path.read_bytes() == before  # nothing written
    assert AuditLog(anchor=False).reanchor().status == "off"


class _Recording(SqliteAnchorCell):
    """The SQLite cell, noting which thread saved each anchor."""

    def __init__(self) -> None:
        super().__init__()
        self.saved_by: list[str] = []

    def advance(self, anchor: AuditAnchor, expected: int | None) -> bool:
        self.saved_by.append(threading.current_thread().name)
        return super().advance(anchor, expected)


def test_appends_leave_the_store_to_a_background_saver_that_batches() -> None:
    cell = _Recording()
    log = AuditLog(anchor=cell)
    for i in range(50):
        log.append("tool_call", {"i": i})
    deadline = time.monotonic() + 10
    while (cell.load(anchor_key(log.path)) or _NONE).entries != 50:
        assert time.monotonic() < deadline, "the saver did not catch up"
        time.sleep(0.02)
    assert set(cell.saved_by) == {"chorus-audit-anchor"}  # never the appending thread
    assert len(cell.saved_by) < 50  # a burst is saved in a few writes, not one each


_NONE = AuditAnchor("", -1, "", 0, "", 0.0)
