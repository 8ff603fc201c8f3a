"""Memory search and context assembly latency: ``uv run python bench/bench_memory.py``.

Builds a memory in a temporary CHORUS_HOME: ``--items`` typed items (10,000)
written as item files and indexed with ``reindex`` (the files-are-the-truth
path), ``--days`` daily notes (365, ~12 lines each) and a 4 KB MEMORY.md; the
text is drawn from a Zipf-like vocabulary so that common words are common.
Then it times:

* ``search``: ``Memory.search`` of ``--queries`` random 2-5 word queries, each
  including the index check against the note files (what every search does);
* ``context``: ``assemble`` (identity, time, environment, cached system spec,
  MEMORY.md, 7 days of notes, top 8 items, CHORUS.md, budget) for a random task;
* ``recall``: what a warm body's turn pays before its prompt goes out: the
  daemon's :class:`~chorus.context.Recall` (one memory kept open in its own
  thread, as the daemon runs it), side by side with ``recall_block`` opening the
  memory for each turn (how the daemon recalled before).

Both with the default embedder (``none``: BM25 only) against the issue's
targets (search p95 <= 20 ms, context <= 50 ms), and search once more with the
``hashing`` embedder (vectors fused by RRF), for information: it has no target.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import random
import statistics
import tempfile
import time
from pathlib import Path

TARGETS_MS = {"search": 20.0, "context": 50.0}


def percentile(ordered: list[float], q: float) -> float:
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def vocabulary(rng: random.Random, size: int = 3000) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    return ["".join(rng.choice(letters) for _ in range(rng.randint(3, 9))) for _ in range(size)]


def sentence(rng: random.Random, words: list[str], n: int) -> str:
    # Zipf-like: index ~ size * u^3 favours the first words.
    return " ".join(words[int(len(words) * rng.random() ** 3)] for _ in range(n))


def build(root: Path, items: int, days: int, rng: random.Random, words: list[str]) -> float:
    """Write the files, then index them; returns the reindex time in seconds."""
    from chorus.memory import ITEM_KINDS, Layout, Memory, MemoryItem
    from chorus.memory._files import render_item, write_atomic

    layout = Layout(root / "memory")
    layout.ensure()
    now = time.time()
    for n in range(items):
        seen = now - rng.random() * 365 * 86400
        item = MemoryItem(
            id=f"m{n:012x}",
            kind=rng.choice(ITEM_KINDS),
            text=sentence(rng, words, rng.randint(6, 24)),
            importance=round(rng.random(), 2),
            reinforcement=rng.randint(1, 5),
            source_kind=rng.choice(["user", "agent", "extraction"]),
            created=seen,
            last_seen=seen,
        )
        write_atomic(layout.item_path(item.id), render_item(item))
    today = dt.date.today()
    for d in range(days):
        day = today - dt.timedelta(days=d)
        lines = [f"# {day}", ""]
        lines += [f"- {h:02d}:00 {sentence(rng, words, 12)}" for h in range(8, 20)]
        layout.day_path(day).write_text("\n".join(lines) + "\n")
    layout.memory_md.write_text("\n\n".join(sentence(rng, words, 40) for _ in range(16)))
    started = time.perf_counter()
    with Memory(layout) as mem:
        counts = mem.reindex()
    took = time.perf_counter() - started
    print(f"indexed {counts['items']} items and {counts['chunks']} note chunks in {took:.1f} s")
    return took


def time_search(root: Path, queries: list[str], embedder: str) -> list[float]:
    from chorus.memory import Layout, Memory, MemorySettings

    out = []
    with Memory(Layout(root / "memory"), MemorySettings(embedder=embedder)) as mem:  # type: ignore[arg-type]
        mem.search(queries[0])  # warm: vectors built after an embedder change
        for query in queries:
            started = time.perf_counter()
            mem.search(query)
            out.append((time.perf_counter() - started) * 1000)
    return out


def time_context(root: Path, tasks: list[str]) -> list[float]:
    from chorus.context import assemble
    from chorus.memory import Layout, Memory

    cwd = root / "project"
    cwd.mkdir(exist_ok=True)
    (cwd / "CHORUS.md").write_text("Project rules: tests first.\n")
    out = []
    with Memory(Layout(root / "memory")) as mem:
        assemble(cwd, tasks[0], memory=mem)  # writes SOUL.md, probes the system spec once
        for task in tasks:
            started = time.perf_counter()
            assemble(cwd, task, memory=mem)
            out.append((time.perf_counter() - started) * 1000)
    return out


def time_recall(tasks: list[str]) -> list[float]:
    """Each turn opening the memory for itself."""
    from chorus.context import recall_block
    from chorus.memory import MemorySettings

    settings = MemorySettings()
    out = []
    for task in tasks:
        started = time.perf_counter()
        recall_block(task, set(), settings)
        out.append((time.perf_counter() - started) * 1000)
    return out


def time_kept_recall(tasks: list[str]) -> list[float]:
    """The daemon's recall: one memory kept open, in its own thread."""
    import asyncio

    from chorus.context import Recall
    from chorus.memory import MemorySettings

    async def turns(recall: Recall) -> list[float]:
        await recall.block(tasks[0], set(), MemorySettings())  # the first turn opens it
        out = []
        for task in tasks:
            started = time.perf_counter()
            await recall.block(task, set(), MemorySettings())
            out.append((time.perf_counter() - started) * 1000)
        return out

    recall = Recall()
    try:
        return asyncio.run(turns(recall))
    finally:
        recall.close()


def p95_ratio(ours: list[float], base: list[float]) -> float:
    return percentile(sorted(ours), 0.95) / percentile(sorted(base), 0.95)


def line(name: str, ms: list[float], target: float | None) -> str:
    ordered = sorted(ms)
    p95 = percentile(ordered, 0.95)
    ratio = f"  p95/target {p95 / target:.2f} (target {target:.0f} ms)" if target else ""
    return (
        f"{name:<26} n={len(ms):<4} p50 {statistics.median(ordered):7.2f} ms  "
        f"p95 {p95:7.2f} ms  max {ordered[-1]:7.2f} ms{ratio}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--days", type=int, default=365)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--seed", type=int, default=16)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    words = vocabulary(rng)
    with tempfile.TemporaryDirectory(prefix="chorus-bench-memory-") as tmp:
        root = Path(tmp)
        os.environ["CHORUS_HOME"] = str(root)
        build(root, args.items, args.days, rng, words)
        queries = [sentence(rng, words, rng.randint(2, 5)) for _ in range(args.queries)]
        search = time_search(root, queries, "none")
        context = time_context(root, queries[: max(20, args.queries // 5)])
        recall = time_recall(queries[: max(20, args.queries // 5)])
        kept = time_kept_recall(queries[: max(20, args.queries // 5)])
        hashing = time_search(root, queries[: max(20, args.queries // 5)], "hashing")
    print(f"\n{args.items} items, {args.days} days of notes, MEMORY.md 4 KB")
    print(line("search (BM25, default)", search, TARGETS_MS["search"]))
    print(line("context assembly", context, TARGETS_MS["context"]))
    print(line("recall, memory kept open", kept, None))
    print(line("recall, opened per turn", recall, None))
    print(f"recall p95, kept open / opened per turn: {p95_ratio(kept, recall):.2f}")
    print(line("search (hashing vectors)", hashing, None))


if __name__ == "__main__":
    main()
