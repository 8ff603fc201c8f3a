"""Fire a routine as fast as a scheduler can, until killed.

The routine clock runs 600x real time from ``argv[1]`` (the parent's start), so
an every-minute routine is due every 0.1 s; each tick prints how many jobs the
routine has. The parent SIGKILLs this process at random moments and restarts it.
"""

from __future__ import annotations

import asyncio
import sys
import time

from chorus.config import load_config
from chorus.daemon import Supervisor
from chorus.routines import Scheduler
from chorus.store import Redactor, SqliteStore

BASE = 1_900_000_000.0
SPEED = 600.0


async def main(started: float) -> None:
    async with SqliteStore(redactor=Redactor()) as store:
        sup = Supervisor(store, load_config())
        sched = Scheduler(sup, clock=lambda: BASE + (time.time() - started) * SPEED)
        while True:
            await sched.tick()
            print(len(await store.list_firings("fast")), flush=True)


if __name__ == "__main__":
    asyncio.run(main(float(sys.argv[1])))
