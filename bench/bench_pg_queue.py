"""The PostgreSQL job queue and log with several worker processes.

Starts a throwaway cluster (Debian's postgresql), then:

1. queue throughput: the same number of short jobs drained by 1 worker process,
   then by 3 (each claims one job at a time: claim with a lease, append three
   events to the job's session, mark it succeeded); jobs/s and claim latency;
2. exactly-once: 3 workers drain 10,000 jobs; every job claimed exactly once;
3. the log: 3 processes append to one session while this process tails it from
   seq 1 (live, through LISTEN): gaps, duplicates, out-of-order deliveries.

    .venv/bin/python bench/bench_pg_queue.py [--jobs 3000] [--exactly-once 10000]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from chorus.events import Text
from chorus.store import JobState, PostgresStore, Redactor
from chorus.testing import PostgresCluster

HERE = Path(__file__).resolve()


def _store(url: str) -> PostgresStore:
    return PostgresStore(url, redactor=Redactor(), mirror_dir=Path(os.environ["BENCH_MIRROR"]))


# -- worker processes ------------------------------------------------------------------------


async def work(url: str, node: str) -> None:
    """Drain the queue; print one JSON line: claimed ids and claim latencies (s)."""
    claimed: list[str] = []
    latencies: list[float] = []
    async with _store(url) as store:
        while True:
            started = time.perf_counter()
            job = await store.claim_job(node, lease_s=60)
            latencies.append(time.perf_counter() - started)
            if job is None:
                break
            claimed.append(job.id)
            assert job.session_id is not None
            await store.append_many(
                job.session_id, [Text(text=f"{node} step {i}") for i in range(3)]
            )
            await store.update_job(job.id, state=JobState.SUCCEEDED, result={"node": node})
    print(json.dumps({"claimed": claimed, "latencies": latencies}), flush=True)


async def append(url: str, session: str, count: int, tag: str) -> None:
    async with _store(url) as store:
        for start in range(0, count, 20):
            burst = [
                store.append_nowait(session, Text(text=f"{tag} {start + k}")) for k in range(20)
            ]
            await asyncio.gather(*burst)
    print("{}", flush=True)


async def spawn(*argvs: list[str]) -> list[dict[str, list[object]]]:
    procs = [
        await asyncio.create_subprocess_exec(
            sys.executable, str(HERE), *argv, stdout=asyncio.subprocess.PIPE
        )
        for argv in argvs
    ]
    outs = await asyncio.gather(*(p.communicate() for p in procs))
    if any(p.returncode for p in procs):
        raise SystemExit("a worker failed")
    return [json.loads(out.decode().strip().splitlines()[-1]) for out, _ in outs]


# -- phases ----------------------------------------------------------------------------------


async def fill(url: str, jobs: int) -> set[str]:
    """``jobs`` queued jobs, each with its own session (created concurrently)."""
    ids: set[str] = set()
    async with _store(url) as store:
        for start in range(0, jobs, 200):

            async def one(i: int) -> str:
                session = await store.create_session("bench", session_id=f"s{i}")
                return (await store.create_job(f"job {i}", session_id=session.id)).id

            ids.update(
                await asyncio.gather(*(one(i) for i in range(start, min(jobs, start + 200))))
            )
    return ids


async def drain(url: str, workers: int) -> tuple[float, list[str], list[float]]:
    started = time.perf_counter()
    results = await spawn(*(["--worker", url, f"node{i}"] for i in range(workers)))
    wall = time.perf_counter() - started
    claimed = [str(j) for r in results for j in r["claimed"]]
    latencies = [float(str(x)) for r in results for x in r["latencies"]]
    return wall, claimed, latencies


def p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20)[-1] if len(values) > 1 else values[0]


async def throughput(cluster: PostgresCluster, jobs: int) -> None:
    print(f"queue: {jobs} short jobs (claim + 3 appends + succeed), one at a time per worker")
    rows = []
    for workers in (1, 3):
        url = cluster.create_database(f"throughput{workers}")
        ids = await fill(url, jobs)
        wall, claimed, latencies = await drain(url, workers)
        assert sorted(claimed) == sorted(ids), "a job was lost or claimed twice"
        rows.append((workers, jobs / wall, statistics.median(latencies), p95(latencies)))
    print(f"  {'workers':>7} {'jobs/s':>8} {'claim p50 ms':>13} {'claim p95 ms':>13}")
    for workers, rate, p50, p95_ in rows:
        print(f"  {workers:>7} {rate:>8.0f} {p50 * 1000:>13.2f} {p95_ * 1000:>13.2f}")
    print(f"  3 workers / 1 worker: {rows[1][1] / rows[0][1]:.2f}x jobs/s")


async def exactly_once(cluster: PostgresCluster, jobs: int) -> None:
    url = cluster.create_database("exactly_once")
    ids = await fill(url, jobs)
    wall, claimed, _ = await drain(url, 3)
    dupes = len(claimed) - len(set(claimed))
    missing = len(ids - set(claimed))
    print(f"exactly-once: {jobs} jobs, 3 workers, {wall:.1f} s: {len(claimed)} claims,")
    print(f"  {dupes} claimed twice, {missing} never claimed, {len(set(claimed) - ids)} unknown")
    async with _store(url) as store:
        states = {j.state for j in await store.list_jobs()}
    print(f"  final states: {sorted(s.value for s in states)}")


async def tail(cluster: PostgresCluster, per_writer: int) -> None:
    url = cluster.create_database("tail")
    total = 3 * per_writer
    async with _store(url) as store:
        await store.create_session("bench", session_id="shared")
        sub = await store.subscribe("shared", from_seq=1)
        seen: list[int] = []

        async def follow() -> None:
            async for event in sub:
                seen.append(event.seq)
                if len(seen) == total:
                    return

        follower = asyncio.create_task(follow())
        started = time.perf_counter()
        await spawn(*(["--append", url, "shared", str(per_writer), f"w{i}"] for i in range(3)))
        await asyncio.wait_for(follower, 60)
        wall = time.perf_counter() - started
        await sub.aclose()
    gaps = sum(1 for a, b in itertools.pairwise(seen) if b > a + 1)
    dupes = len(seen) - len(set(seen))
    disorder = sum(1 for a, b in itertools.pairwise(seen) if b < a)
    print(f"log: 3 processes x {per_writer} appends to one session, tailed live from seq 1:")
    print(f"  {len(seen)} delivered in {wall:.1f} s ({total / wall:.0f} events/s),")
    print(f"  {gaps} gaps, {dupes} duplicates, {disorder} out of order;")
    print(f"  seqs 1..{total} all present: {sorted(seen) == list(range(1, total + 1))}")


async def main(args: argparse.Namespace) -> None:
    with PostgresCluster.start() as cluster:
        await throughput(cluster, args.jobs)
        await exactly_once(cluster, args.exactly_once)
        await tail(cluster, args.appends)


def cli() -> None:
    if sys.argv[1:2] == ["--worker"]:
        asyncio.run(work(sys.argv[2], sys.argv[3]))
        return
    if sys.argv[1:2] == ["--append"]:
        asyncio.run(append(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=3000)
    parser.add_argument("--exactly-once", type=int, default=10_000)
    parser.add_argument("--appends", type=int, default=5000, help="per writer")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="chorus-bench-pg-") as mirror:
        os.environ["BENCH_MIRROR"] = mirror
        asyncio.run(main(args))


if __name__ == "__main__":
    cli()
