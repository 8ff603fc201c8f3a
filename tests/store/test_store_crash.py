"""Crash consistency: kill -9 a writer mid-batch, reopen, nothing torn, nothing lost."""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import sys
from dataclasses import dataclass
from pathlib import Path

from chorus.events import parse_event
from chorus.store import Redactor, SqliteStore

SCRIPT = Path(__file__).parent / "scripts" / "crash_writer.py"
SESSION = "crash"


async def run_and_kill(home: Path, acked_at_least: int) -> int:
    """Run the writer until it acknowledged ``acked_at_least`` seqs, SIGKILL it,
    and return the highest seq it acknowledged."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(SCRIPT),
        env={**os.environ, "CHORUS_HOME": str(home)},
        stdout=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None
    acked = 0
    try:
        while acked < acked_at_least:
            line = await proc.stdout.readline()
            assert line, "the writer exited on its own"
            acked = int(line)
    finally:
        proc.send_signal(signal.SIGKILL)  # the writer is always mid-batch: it never waits
        rest = await proc.stdout.read()
        await proc.wait()
    for line in rest.split():
        acked = max(acked, int(line))
    return acked


@dataclass
class Snapshot:
    integrity: list[str]
    seqs: list[int]
    raw_ns: list[int]
    bad_payloads: list[int]


def inspect(path: Path) -> Snapshot:
    """Read the database as a fresh process would after the crash."""
    conn = sqlite3.connect(path)
    try:
        integrity = [row[0] for row in conn.execute("PRAGMA integrity_check")]
        rows = conn.execute(
            "SELECT seq, payload FROM events WHERE session_id = ? ORDER BY seq", (SESSION,)
        ).fetchall()
        raw_ns = [r[0] for r in conn.execute("SELECT n FROM raw_lines ORDER BY n")]
    finally:
        conn.close()
    bad = [seq for seq, payload in rows if not _whole(seq, payload)]
    return Snapshot(integrity, [seq for seq, _ in rows], raw_ns, bad)


def _whole(seq: int, payload: str) -> bool:
    event = parse_event(payload)
    return event.seq == seq and event.type == "text" and event.text.endswith("x" * 400)


def mirror_seqs(home: Path) -> list[int]:
    """Seqs of the complete lines of the mirror (a torn last line is allowed)."""
    data = (home / "sessions" / f"{SESSION}.jsonl").read_text(encoding="utf-8")
    return [parse_event(line).seq for line in data.split("\n")[:-1]]


async def test_kill_9_mid_batch_leaves_a_clean_gap_free_log(chorus_home: Path) -> None:
    db = chorus_home / "chorus.db"
    acked = 0
    for cycle in range(3):
        acked = await run_and_kill(chorus_home, acked + 400 + 150 * cycle)
        snap = await asyncio.to_thread(inspect, db)
        assert snap.integrity == ["ok"]
        assert snap.seqs == list(range(1, len(snap.seqs) + 1)), "seqs have a gap"
        assert len(snap.seqs) >= acked, "an acknowledged event was lost"
        assert len(snap.seqs) % 20 == 0, "an append_many was torn"
        assert snap.bad_payloads == []
        assert snap.raw_ns == list(range(1, len(snap.raw_ns) + 1))
        mirrored = mirror_seqs(chorus_home)
        assert mirrored == list(range(1, len(mirrored) + 1))

    async with SqliteStore(redactor=Redactor()) as store:
        assert await store.integrity_check() == ["ok"]
        await store.rebuild_mirror(SESSION)
        assert (await store.append(SESSION, parse_event('{"type":"text","text":"after"}'))).seq == (
            len(snap.seqs) + 1
        )
    assert mirror_seqs(chorus_home) == list(range(1, len(snap.seqs) + 2))
