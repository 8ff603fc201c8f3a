"""The daemon's recall: :func:`recall_block` on one memory kept open in a thread of
its own, for every warm turn.

A memory opened per turn read its index's file stamps and checked every note at
each search (a first search's sweep). Kept open, it sweeps as it is meant to: when
a notes folder changes and every few minutes, and in between only ``MEMORY.md`` and
the day's notes. One thread owns it (a memory is not shared between threads); the
turns of all sessions take their turn there. A memory that fails (its folder
removed, a setting changed) is opened afresh at the next turn.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from concurrent.futures import ThreadPoolExecutor

from chorus.context._extras import recall_block
from chorus.memory import Layout, Memory, MemorySettings


class Recall:
    """The "relevant memory" blocks of warm turns, from one open memory."""

    def __init__(self) -> None:
        self._pool: ThreadPoolExecutor | None = None
        self._memory: Memory | None = None

    async def block(
        self, prompt: str, known: Collection[str], settings: MemorySettings
    ) -> tuple[str, list[str]]:
        """:func:`recall_block` for ``prompt`` (in the recall's own thread)."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="chorus-recall")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, self._block, prompt, known, settings)

    def close(self) -> None:
        """Close the memory and end the thread (idempotent)."""
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.submit(self._drop)
            pool.shutdown(wait=True)

    def _block(
        self, prompt: str, known: Collection[str], settings: MemorySettings
    ) -> tuple[str, list[str]]:
        try:
            return recall_block(prompt, known, settings, memory=self._open(settings))
        except Exception:
            self._drop()  # its folder removed or replaced: opened afresh next time
            raise

    def _open(self, settings: MemorySettings) -> Memory:
        memory = self._memory
        if memory is not None and (
            memory.settings != settings or memory.layout != Layout.default()
        ):
            self._drop()
        if self._memory is None:
            self._memory = Memory(settings=settings)
        return self._memory

    def _drop(self) -> None:
        memory, self._memory = self._memory, None
        if memory is not None:
            memory.close()
