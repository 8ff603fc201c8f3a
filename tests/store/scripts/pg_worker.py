"""A worker process on a shared PostgreSQL store, for the multi-process tests.

    pg_worker.py append URL SESSION COUNT TAG   append COUNT events in bursts
    pg_worker.py claim URL NODE                 claim jobs until none is left

``append`` prints nothing until done, then ``done``. ``claim`` prints one claimed
job id per line, then ``done``.
"""

from __future__ import annotations

import asyncio
import random
import sys

from chorus.events import Text
from chorus.store import JobState, PostgresStore, Redactor


async def append(url: str, session: str, count: int, tag: str) -> None:
    rng = random.Random(tag)
    async with PostgresStore(url, redactor=Redactor()) as store:
        written = 0
        while written < count:
            size = min(rng.randint(1, 25), count - written)
            burst = [
                store.append_nowait(session, Text(text=f"{tag}-{written + k}")) for k in range(size)
            ]
            await asyncio.gather(*burst)
            written += size
            await asyncio.sleep(rng.random() / 200)
    print("done", flush=True)


async def claim(url: str, node: str) -> None:
    async with PostgresStore(url, redactor=Redactor()) as store:
        while (job := await store.claim_job(node, lease_s=60)) is not None:
            print(job.id, flush=True)
            await store.update_job(job.id, state=JobState.SUCCEEDED, result={"node": node})
    print("done", flush=True)


def main() -> None:
    mode, url, *rest = sys.argv[1:]
    if mode == "append":
        asyncio.run(append(url, rest[0], int(rest[1]), rest[2]))
    else:
        asyncio.run(claim(url, rest[0]))


if __name__ == "__main__":
    main()
