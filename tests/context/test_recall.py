"""The daemon's recall: one memory kept open for every warm turn, in its own thread."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path

import pytest

from chorus.context import Recall, recall_block
from chorus.memory import Hit, Layout, Memory, MemorySettings


def _add(chorus_home: Path, text: str) -> str:
    with Memory(Layout(chorus_home / "memory"), MemorySettings()) as mem:
        return mem.add(text, "fact").item.id


def test_the_recall_finds_what_recall_block_finds_and_sees_later_items(
    chorus_home: Path,
) -> None:
    first = _add(chorus_home, "the zebra crossing is on Elm street")
    settings = MemorySettings()
    recall = Recall()

    async def turns() -> list[tuple[str, list[str]]]:
        one = await recall.block("zebra", set(), settings)
        assert one == recall_block("zebra", set(), settings)  # a memory opened for it
        later = _add(chorus_home, "a zebra sleeps standing up")  # written while it is open
        two = await recall.block("zebra", {first}, settings)
        assert two[1] == [later]
        return [one, two]

    try:
        one, _ = asyncio.run(turns())
    finally:
        recall.close()
    assert one[1] == [first]


def test_the_memory_stays_open_and_sweeps_its_notes_once(
    chorus_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A memory opened per turn checked every note at every search; kept open it does
    so at its first search only (then when a notes folder changes)."""
    _add(chorus_home, "the zebra crossing is on Elm street")
    sweeps: list[str] = []
    sweep = Memory._sweep

    def counted(self: Memory) -> None:
        sweeps.append(threading.current_thread().name)
        sweep(self)

    monkeypatch.setattr(Memory, "_sweep", counted)
    recall = Recall()

    async def turns() -> None:
        for _ in range(4):
            await recall.block("zebra", set(), MemorySettings())

    try:
        asyncio.run(turns())
    finally:
        recall.close()
    assert len(sweeps) == 1
    assert sweeps[0].startswith("chorus-recall")


def test_a_memory_that_fails_is_opened_afresh_at_the_next_turn(
    chorus_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    item = _add(chorus_home, "the zebra crossing is on Elm street")
    recall = Recall()
    search, failed = Memory.search, list[Memory]()

    def once_broken(self: Memory, query: str, limit: int = 10) -> list[Hit]:
        if not failed:
            failed.append(self)
            raise sqlite3.OperationalError("disk I/O error")
        return search(self, query, limit)

    monkeypatch.setattr(Memory, "search", once_broken)

    async def turns() -> tuple[str, list[str]]:
        with pytest.raises(sqlite3.OperationalError):
            await recall.block("zebra", set(), MemorySettings())
        return await recall.block("zebra", set(), MemorySettings())

    try:
        assert asyncio.run(turns())[1] == [item]
        assert recall._memory is not failed[0]  # the failed one was closed and replaced
    finally:
        recall.close()
    assert recall._pool is None
