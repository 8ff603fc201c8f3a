"""The supervisor's side of the thinking frameworks: the :class:`chorus.frameworks.Port`
a framework job runs through (its own turns, child jobs, notes). A job's framework
options are read and checked by :func:`chorus.frameworks.framework_options`."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from chorus.events import Event, Notice, TurnCompleted
from chorus.frameworks import (
    Settings,
    consensus,
    parse_vote,
    pick,
    reflect,
    script,
    sequential,
    vote_prompt,
)
from chorus.frameworks import framework_options as framework_options  # the supervisor's
from chorus.permissions import PermissionAsk
from chorus.store import JobRecord
from chorus.worktrees import git_diff

if TYPE_CHECKING:
    from chorus.daemon._supervisor import Supervisor
    from chorus.policy import Verdict, Vote

_RUNNERS = {
    "consensus": consensus,
    "reflect": reflect,
    "sequential": sequential,
    "script": script,
}


class FrameworkPort:
    """What a framework job may do, on the supervisor that runs it."""

    def __init__(self, sup: Supervisor) -> None:
        self._sup = sup
        self._children: dict[str, asyncio.Future[JobRecord]] = {}

    async def run(self, job: JobRecord, name: str) -> Event:
        settings = self._settings(job)
        if name == "auto":
            name, why = pick(job.prompt, len(self.healthy(settings.planners)))
            await self.note(job, f"framework auto chose {name}: {why}", "framework")
            if name == "direct":
                return await self.turn(job, job.prompt)
        return await _RUNNERS[name](self, job, settings)

    def _settings(self, job: JobRecord) -> Settings:
        opts = job.options
        planners = tuple(opts.get("planners") or self._sup.router.bodies)
        reviewer = opts.get("reviewer") or self._other_than(job.body)
        return Settings(planners=planners, reviewer=reviewer, rounds=int(opts.get("rounds") or 1))

    def _other_than(self, body: str | None) -> str | None:
        others = self.healthy([b for b in self._sup.router.bodies if b != body])
        return others[0] if others else None

    # -- the Port ---------------------------------------------------------------------------

    async def turn(self, job: JobRecord, prompt: str, plan: str | None = None) -> Event:
        return await self._sup.direct(job, prompt, plan)

    async def child(self, job: JobRecord, prompt: str, body: str, mode: str) -> JobRecord:
        """Run ``prompt`` as a child job on ``body`` (a session of its own, in the
        parent's folder) and return it once it has ended."""
        parent = await self._sup.store.get_session(job.session_id or "")
        record = await self._sup.store.create_session(body, cwd=parent.cwd)
        options = {"permission_mode": mode, "parent_job": job.id, "system": True}
        child = await self._sup.store.create_job(
            prompt, body=body, session_id=record.id, options=options
        )
        done: asyncio.Future[JobRecord] = asyncio.get_running_loop().create_future()
        self._children[child.id] = done
        self._sup.wake()
        return await done

    def ended(self, job: JobRecord) -> None:
        """Called by the supervisor as each job ends (children complete their wait)."""
        future = self._children.pop(job.id, None)
        if future is not None and not future.done():
            future.set_result(job)

    async def note(self, job: JobRecord, message: str, kind: str) -> None:
        await self._sup.note(job, Notice(message=message, kind=kind))

    def healthy(self, bodies: Sequence[str]) -> list[str]:
        now = time.time()
        book, key = self._sup.health, self._sup.provider_key
        return [b for b in bodies if book.healthy(key(b), now)]

    async def vote(
        self, job: JobRecord, voter: str, ask: PermissionAsk, verdict: Verdict
    ) -> Vote | None:
        """Ask ``voter`` (a read-only child job) to vote on a risky call of ``job``."""
        call = json.dumps(ask.input)[:4000]
        prompt = vote_prompt(ask.tool, call, verdict.reason, ask.cwd)
        try:
            async with asyncio.timeout(_VOTE_TIMEOUT_S):
                record = await self.child(job, prompt, voter, "plan")
        except TimeoutError:
            return None
        parsed = parse_vote(_text(record))
        if parsed is None:
            return None
        from chorus.policy import Vote  # the engine loads with the first gate

        return Vote("deny" if parsed[0] == "deny" else "allow", parsed[1], voter)

    async def cost(self, record: JobRecord) -> float | None:
        """What a child job's turns cost, as its body reported it (None: not reported)."""
        events = await self._sup.store.read_events(record.session_id or "")
        costs = [
            e.cost_usd for e in events if isinstance(e, TurnCompleted) and e.job_id == record.id
        ]
        known = [c for c in costs if c is not None]
        return sum(known) if known else None

    async def changes(self, job: JobRecord) -> str:
        """What the job changed in its folder: ``git diff`` where it is a repository."""
        session = await self._sup.store.get_session(job.session_id or "")
        return await asyncio.to_thread(_git_diff, Path(session.cwd or "."))


_VOTE_TIMEOUT_S = 180.0


def _text(record: JobRecord) -> str:
    result = record.result if isinstance(record.result, dict) else {}
    return str(result.get("text") or "")


def _git_diff(folder: Path) -> str:
    """Through Chorus's safe git runner: the job may have written ``.git`` (an
    external diff, an fsmonitor), and this runs in the daemon, unsandboxed."""
    return git_diff(folder, "HEAD", "--stat", "--patch", timeout=30)[:20_000]
