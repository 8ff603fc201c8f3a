"""Append throughput of the SQLite store: ``uv run python bench/bench_store_append.py``.

Appends ``--events`` single events (``store.append_nowait``, the call a session
makes for every event, or ``await store.append`` with ``--mode await``) with
``--concurrency`` appends in flight, into a fresh
store in a temporary CHORUS_HOME, and prints events per second. Group commit is
what makes this fast: the writer thread commits everything queued at once.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from pathlib import Path

from chorus.events import Text, ToolCall
from chorus.store import Redactor, SqliteStore


def sample_events(count: int) -> list[Text | ToolCall]:
    """A realistic mix: mostly text, some tool calls, with one secret to redact."""
    events: list[Text | ToolCall] = []
    for i in range(count):
        if i % 10 == 9:
            events.append(
                ToolCall(
                    call_id=f"c{i}", tool="shell", native_tool="Bash", input={"command": f"ls {i}"}
                )
            )
        else:
            events.append(Text(text=f"event {i}: the quick brown fox jumps over the lazy dog"))
    events[len(events) // 2] = Text(text="export GITHUB_TOKEN=not-for-the-log")
    return events


async def run(events: int, concurrency: int, synchronous: str, mode: str) -> float:
    """Append ``events`` events; return events per second."""
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["CHORUS_HOME"] = tmp
        store = SqliteStore(
            Path(tmp) / "chorus.db",
            redactor=Redactor(),
            synchronous="FULL" if synchronous == "FULL" else "NORMAL",
            max_queue=max(10_000, concurrency * 2),
        )
        async with store:
            sid = (await store.create_session("bench")).id
            batch = sample_events(events)
            start = time.perf_counter()
            for offset in range(0, events, concurrency):
                chunk = batch[offset : offset + concurrency]
                if mode == "nowait":
                    await asyncio.gather(*(store.append_nowait(sid, event) for event in chunk))
                else:
                    await asyncio.gather(*(store.append(sid, event) for event in chunk))
            elapsed = time.perf_counter() - start
            assert await store.last_seq(sid) == events
        return events / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--concurrency", type=int, default=1000)
    parser.add_argument("--synchronous", choices=["FULL", "NORMAL"], default="FULL")
    parser.add_argument(
        "--mode",
        choices=["nowait", "await"],
        default="nowait",
        help="append_nowait futures (a session queuing as events arrive) or append coroutines",
    )
    args = parser.parse_args()
    rate = asyncio.run(run(args.events, args.concurrency, args.synchronous, args.mode))
    print(
        f"{args.events} events, {args.concurrency} in flight ({args.mode}), "
        f"synchronous={args.synchronous}: {rate:,.0f} events/s"
    )


if __name__ == "__main__":
    main()
