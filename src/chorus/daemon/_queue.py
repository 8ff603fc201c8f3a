"""This node's side of the job queue: admission, ordering, and the sessions' state.

The jobs themselves are rows in the store (claimed with leases by
:class:`~chorus.store.WorkerNode`); what the queue keeps is what decides the next
claim here:

* at most ``limit()`` jobs run at once (a framework's child jobs still run while
  their parent waits in its slot: ``system_only`` claims past the limit);
* jobs of one session run one at a time, in submission order: a session is
  *busy* while one of its jobs runs, and the next waits behind it;
* a *paused* session (``chorus talk`` has it) runs nothing until resumed.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

from chorus.store import Firing, JobRecord, SessionRecord, Store, WorkerNode


class JobQueue:
    """Which sessions are busy or paused here, and the claims that respect them."""

    def __init__(self, store: Store, node: WorkerNode, limit: Callable[[], int]) -> None:
        self._store = store
        self._node = node
        self._limit = limit
        self._busy: set[str] = set()
        self._paused: set[str] = set()
        self._wake = asyncio.Event()
        #: Held while claiming, and by a steer deciding whether its job is still queued.
        self.lock = asyncio.Lock()

    # -- the sessions' state -------------------------------------------------------------

    def is_busy(self, session_id: str) -> bool:
        return session_id in self._busy

    def is_paused(self, session_id: str) -> bool:
        return session_id in self._paused

    def busy(self) -> list[str]:
        return sorted(self._busy)

    def paused(self) -> list[str]:
        return sorted(self._paused)

    def pause(self, session_id: str) -> bool:
        """Run no new job of the session; True when none runs now (free to close)."""
        self._paused.add(session_id)
        return session_id not in self._busy

    def resume(self, session_id: str) -> None:
        self._paused.discard(session_id)
        self.wake()

    def release(self, session_id: str | None) -> None:
        """The session's job ended here: its next job may run."""
        self._busy.discard(session_id or "")
        self.wake()

    # -- claiming ------------------------------------------------------------------------

    def wake(self) -> None:
        """Look at the queue now (a job was queued, or a slot freed)."""
        self._wake.set()

    async def wait(self, seconds: float) -> None:
        """Until woken, or ``seconds`` have passed."""
        self._wake.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), seconds)

    async def claim(self) -> JobRecord | None:
        """The next job this node may run now (its session marked busy), or None. No
        claims while the shared database is away. Call it holding :attr:`lock`."""
        if self._store.outage() is not None:
            return None
        system_only = len(self._busy) >= self._limit()
        job = await self._node.claim(self._busy | self._paused, system_only=system_only)
        if job is not None:
            self._busy.add(job.session_id or "")
        return job

    # -- admission -----------------------------------------------------------------------

    async def add(
        self,
        prompt: str,
        session: SessionRecord,
        options: dict[str, Any],
        *,
        job_id: str | None = None,
        firing: Firing | None = None,
    ) -> JobRecord:
        """Queue a job on ``session``, to run on the host where its folder is; a
        routine's job with its firing, in one transaction. Wake the queue once the
        job's first events are written."""
        affinity = self._node.affinity_for(session.cwd)
        where: dict[str, Any] = {"body": session.body, "session_id": session.id}
        if firing is not None:
            options = {**options, "fired_by": self._node.id}
            return await self._store.create_fired_job(
                firing, prompt, options=options, affinity=affinity, **where
            )
        return await self._store.create_job(
            prompt, options=options, job_id=job_id, affinity=affinity, **where
        )

    async def follow_up(self, job: JobRecord, prompt: str, options: dict[str, Any]) -> JobRecord:
        """Queue a job after ``job`` on its session (a steer of an ended job)."""
        return await self._store.create_job(
            prompt,
            body=job.body,
            session_id=job.session_id,
            options=options,
            affinity=job.affinity,
        )
