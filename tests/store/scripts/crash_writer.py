"""Appends to the store under $CHORUS_HOME until killed, printing each
acknowledged seq on stdout. Run by test_store_crash.py, which kills it with -9."""

from __future__ import annotations

import asyncio
import contextlib

from chorus.events import Text
from chorus.store import Redactor, SessionExistsError, SqliteStore, repair_store

SESSION = "crash"


async def main() -> None:
    async with SqliteStore(redactor=Redactor()) as store:
        # As the daemon does at start: a kill between a commit and its mirror
        # write left the mirror behind the log; it is rebuilt before any append.
        await repair_store(store)
        # A previous run was killed: carry on where it stopped.
        with contextlib.suppress(SessionExistsError):
            await store.create_session("crash-body", session_id=SESSION)
        round_ = 0
        while True:
            appends = [
                store.append_many(SESSION, [Text(text=f"{round_}-{k}-" + "x" * 400)] * 20)
                for k in range(10)
            ]
            raws = [store.append_raw(SESSION, "stdout", f"raw {round_}-{k}") for k in range(20)]
            results = await asyncio.gather(*appends)
            await asyncio.gather(*raws)
            print(max(e.seq for batch in results for e in batch), flush=True)
            round_ += 1


asyncio.run(main())
