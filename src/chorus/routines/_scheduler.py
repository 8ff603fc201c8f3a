"""The scheduler: runs inside the daemon, next to the supervisor.

Each tick it reloads the routine files (a bad one is listed as invalid, the others
run), works out which firings are due from the store's firing rows (never from
memory, so a restarted daemon continues where the dead one stopped), applies the
routine's catch-up and concurrency policies, and queues jobs through
``Supervisor.submit`` with the firing attached: the firing row and the job are
written in one transaction, so a firing queues at most one job, ever.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from watchfiles import awatch

from chorus._errors import ChorusError
from chorus.bodies import body_names
from chorus.config import load_config
from chorus.jobs import JobPort, JobRequest
from chorus.routines._errors import RoutineError, UnknownRoutineError
from chorus.routines._heartbeat import (
    HEARTBEAT,
    active_now,
    heartbeat_path,
    heartbeat_prompt,
    heartbeat_routine,
    items_done,
    read_unchecked,
    tick_items,
)
from chorus.routines._load import InvalidRoutine, Loaded, load_routines
from chorus.routines._model import Routine
from chorus.routines._retry import RetryQueue
from chorus.routines._schedule import At, admit, due_firings, next_fire, plan_catch_up
from chorus.routines._snapshot import changed as changed_files
from chorus.routines._snapshot import load as load_snapshot
from chorus.routines._snapshot import save as save_snapshot
from chorus.routines._snapshot import take as take_snapshot
from chorus.routines._watch import WatchFn, paths_text, watch_changes
from chorus.store import (
    Firing,
    FiringExistsError,
    FiringRecord,
    JobRecord,
    JobState,
    RoutineRecord,
    StoreError,
)

log = logging.getLogger("chorus.routines")

Clock = Callable[[], float]
_ACTIVE = (JobState.QUEUED, JobState.RUNNING)
#: How many recent firings are looked at to count a routine's active jobs.
_RECENT = 50


@dataclass(frozen=True, slots=True)
class FireResult:
    """What one firing did: ``outcome`` as recorded, and the job when one was queued."""

    routine: str
    outcome: str
    job: JobRecord | None = None
    detail: str = ""


class Scheduler:
    """Create with the daemon's supervisor, then ``await run()`` in a task; cancel it to
    stop. ``clock`` is injectable for tests; ``poll_s`` bounds how long a tick waits
    (routine files are re-read each tick); ``watch`` is watchfiles' ``awatch`` unless
    a test brings a failing one. Creating it registers its retry queue's
    outcome and status hooks on the supervisor."""

    def __init__(
        self,
        sup: JobPort,
        *,
        clock: Clock = time.time,
        poll_s: float = 2.0,
        on_time_s: float = 90.0,
        watch: WatchFn = awatch,
    ) -> None:
        self.sup = sup
        self.store = sup.store
        self.clock = clock
        self.poll_s = poll_s
        self.on_time_s = on_time_s
        self._watch_fn = watch
        #: The latest notice per routine (e.g. its watcher degraded to polling).
        self.notices: dict[str, str] = {}
        self.loaded = Loaded()
        self._wake = asyncio.Event()
        self._watchers: dict[str, tuple[tuple[str, float], asyncio.Task[None]]] = {}
        self.retries = RetryQueue(sup, clock=clock)
        #: Run at every heartbeat tick, busy or quiet (the integrity guardian).
        self.heartbeat_hooks: list[Callable[[], Awaitable[object]]] = []
        sup.outcomes.on_end(lambda end: self.retries.on_outcome(end.job, end.ended))
        sup.outcomes.on_end(lambda end: self._heartbeat_done(end.job, end.ended))
        sup.status_hooks.append(self.retries.status)
        #: The soonest scheduled firing, as of the last tick (``chorus status``).
        self.upcoming: dict[str, Any] | None = None
        sup.status_hooks.append(lambda: {"next_routine": self.upcoming})

    # -- the loop ---------------------------------------------------------------------

    async def run(self) -> None:
        """Tick until cancelled; watchers are cancelled with it."""
        try:
            while True:
                try:
                    await self.tick()
                except Exception:  # one bad tick must not stop every routine for good
                    log.exception("routine tick failed")
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), self.poll_s)
        finally:
            await self._stop_watchers(set(self._watchers))

    def wake(self) -> None:
        self._wake.set()

    def load(self) -> Loaded:
        """The routine files plus the built-in heartbeat, validated now."""
        config = load_config()
        loaded = load_routines(config, body_names(config))
        beat = heartbeat_routine(config)
        if HEARTBEAT in loaded.valid:
            loaded.valid.pop(HEARTBEAT)
            loaded.invalid.append(InvalidRoutine(HEARTBEAT, "", "the name is reserved"))
        if isinstance(beat, Routine):
            loaded.valid[HEARTBEAT] = beat
        elif beat is not None:
            loaded.invalid.append(beat)
        self.loaded = loaded
        return loaded

    async def tick(self) -> None:
        """Fire every due routine once (by the store's firing rows), keep the file
        watchers in step with the routines, enforce job timeouts, queue due retries."""
        loaded = self.load()
        records = await self.records()
        now = self.clock()
        for routine in loaded.valid.values():
            record = records.get(routine.name) or await self._register(routine.name)
            if routine.schedule is not None and self.is_enabled(routine, record):
                await self._due(routine, record, now)
        await self._sync_watchers(loaded, records)
        await self._enforce_timeouts(loaded, now)
        await self.retries.tick()
        self.upcoming = await self._soonest(loaded, await self.records())

    async def _soonest(
        self, loaded: Loaded, records: dict[str, RoutineRecord]
    ) -> dict[str, Any] | None:
        """The next scheduled firing of any enabled routine (``status``)."""
        soonest: dict[str, Any] | None = None
        for routine in loaded.valid.values():
            record = records.get(routine.name)
            if not self.is_enabled(routine, record):
                continue
            at = await self.next_fire_of(routine, record)
            if at is not None and (soonest is None or at < soonest["at"]):
                soonest = {"name": routine.name, "at": at}
        return soonest

    async def _register(self, name: str) -> RoutineRecord:
        return await self.store.register_routine(name, now=self.clock())

    async def records(self) -> dict[str, RoutineRecord]:
        return {r.name: r for r in await self.store.list_routine_records()}

    @staticmethod
    def is_enabled(routine: Routine, record: RoutineRecord | None) -> bool:
        return routine.enabled and (record is None or record.enabled)

    # -- scheduled firings ------------------------------------------------------------------

    async def _due(self, routine: Routine, record: RoutineRecord, now: float) -> None:
        assert routine.schedule is not None
        last = await self.store.list_firings(routine.name, kind="schedule", limit=1)
        # Nothing before the routine was first seen is due, except a one-shot: its
        # time may have passed while no daemon ran (the catch-up policy decides).
        start = 0.0 if isinstance(routine.schedule, At) else record.anchor_at
        after = max(start, last[0].scheduled_for if last else start)
        limit = max(routine.catch_up_cap, 1)
        due, _ = due_firings(routine.schedule, after, now, anchor=record.anchor_at, limit=limit)
        plan = plan_catch_up(
            routine.catch_up,
            due,
            now,
            grace_s=routine.catch_up_grace_s,
            cap=routine.catch_up_cap,
            on_time_s=self.on_time_s,
        )
        for at in plan.missed:
            await self._record(Firing(routine.name, at), "missed")
        for at in plan.fire:
            await self.fire(routine, Firing(routine.name, at))

    async def next_fire_of(self, routine: Routine, record: RoutineRecord | None) -> float | None:
        """When ``routine`` fires next; one the scheduler has not seen yet (its file
        was just written) is anchored now, as its first sight will anchor it."""
        if routine.schedule is None:
            return None
        anchor = record.anchor_at if record is not None else self.clock()
        last = await self.store.list_firings(routine.name, kind="schedule", limit=1)
        after = max(anchor, last[0].scheduled_for if last else 0.0, self.clock())
        return next_fire(routine.schedule, after, anchor=anchor)

    # -- firing --------------------------------------------------------------------------

    async def fire(self, routine: Routine, firing: Firing, *, manual: bool = False) -> FireResult:
        """Fire once: apply the concurrency policy (not for a manual run), then queue the
        job with the firing attached. A firing already recorded does nothing."""
        if routine.name == HEARTBEAT:
            await self._beat()
            quiet = self._heartbeat_quiet(manual)
            if quiet is not None:
                return await self._record(firing, quiet)
        if not manual:
            running, queued = await self._active(routine.name)
            decision = admit(routine.concurrency, running=running, queued=queued)
            if decision != "enqueue":
                return await self._record(firing, "skipped" if decision == "skip" else "coalesced")
        return await self._submit(routine, firing)

    async def _beat(self) -> None:
        for hook in self.heartbeat_hooks:
            try:
                await hook()
            except Exception:
                log.exception("heartbeat hook failed")

    async def _heartbeat_done(self, job: JobRecord, ended: object) -> None:
        """A heartbeat job that succeeded: tick off the items it was given."""
        if job.options.get("routine") != HEARTBEAT or job.state != JobState.SUCCEEDED:
            return
        answer = str((job.result or {}).get("text") or "")
        done = items_done(job.prompt, answer)
        ticked = await asyncio.to_thread(tick_items, heartbeat_path(), done)
        log.info("heartbeat job %s: ticked %d of %d items", job.id, ticked, len(done))

    def _heartbeat_quiet(self, manual: bool) -> str | None:
        """Why this heartbeat tick needs no job (None: it needs one)."""
        if not manual and not active_now(load_config(), self.clock()):
            return "outside_active_hours"
        return None if read_unchecked() else "nothing_to_do"

    async def _submit(self, routine: Routine, firing: Firing) -> FireResult:
        request = JobRequest(
            prompt=self.render(routine, firing),
            body=routine.body,
            cwd=routine.cwd,
            firing=firing,
        )
        try:
            job = await self.sup.submit(request)
        except FiringExistsError:
            return FireResult(routine.name, "already_fired")
        except (ChorusError, OSError) as exc:
            log.warning("routine %s could not queue its job: %s", routine.name, exc)
            failed = Firing(firing.routine, firing.scheduled_for, firing.kind, {"error": str(exc)})
            return await self._record(failed, "error", detail=str(exc))
        log.info("routine %s fired (%s): job %s", routine.name, firing.kind, job.id)
        return FireResult(routine.name, "queued", job)

    async def _record(self, firing: Firing, outcome: str, detail: str = "") -> FireResult:
        with contextlib.suppress(FiringExistsError):
            await self.store.record_firing(firing, outcome)
        return FireResult(firing.routine, outcome, None, detail)

    async def _active(self, name: str) -> tuple[int, int]:
        recent = await self.store.list_firings(name, limit=_RECENT)
        states = [f.job_state for f in recent if f.job_state in _ACTIVE]
        return states.count(JobState.RUNNING), states.count(JobState.QUEUED)

    def render(self, routine: Routine, firing: Firing) -> str:
        """The routine's prompt with ``{date}`` and ``{trigger_path}`` filled in (the
        paths quoted, one per line: :func:`chorus.routines._watch.paths_text`)."""
        if routine.name == HEARTBEAT:
            return heartbeat_prompt(heartbeat_path(), read_unchecked())
        tz = routine.tz()
        date = datetime.fromtimestamp(firing.scheduled_for, tz).date().isoformat()
        paths = firing.detail.get("paths") or []
        prompt = routine.prompt.replace("{date}", date)
        return prompt.replace("{trigger_path}", paths_text([str(p) for p in paths]))

    # -- by hand ------------------------------------------------------------------------------

    def find(self, name: str) -> Routine:
        """The valid routine ``name``; :class:`RoutineError` if it is invalid."""
        loaded = self.load()
        if name in loaded.valid:
            return loaded.valid[name]
        for bad in loaded.invalid:
            if bad.name == name:
                raise RoutineError(bad.error)
        raise UnknownRoutineError(name)

    async def run_now(self, name: str) -> FireResult:
        """``chorus routine run NAME``: fire now, whatever the schedule and policy."""
        routine = self.find(name)
        await self._register(name)
        result = await self.fire(routine, Firing(name, self.clock(), kind="manual"), manual=True)
        self.wake()
        return result

    # -- file-change triggers ---------------------------------------------------------------------

    async def _sync_watchers(self, loaded: Loaded, records: dict[str, RoutineRecord]) -> None:
        wanted = {
            r.name: (r.watch_path or "", r.debounce_s)
            for r in loaded.valid.values()
            if r.kind == "file_change" and self.is_enabled(r, records.get(r.name))
        }
        stale = {n for n, (key, _) in self._watchers.items() if wanted.get(n) != key}
        await self._stop_watchers(stale)
        for name, key in wanted.items():
            if name not in self._watchers:
                task = asyncio.create_task(self._watch(name, *key), name=f"watch-{name}")
                self._watchers[name] = (key, task)

    async def _stop_watchers(self, names: set[str]) -> None:
        tasks = [self._watchers.pop(n)[1] for n in names]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _watch(self, name: str, path: str, debounce_s: float) -> None:
        async def on_batch(paths: list[str]) -> None:
            await self._fire_change(name, path, paths)

        await self._catch_up_changes(name, path)
        try:
            await watch_changes(
                path,
                debounce_s,
                on_batch,
                notice=lambda m: self.notice(name, m),
                watch=self._watch_fn,
            )
        except (OSError, RuntimeError) as exc:
            self.notice(name, f"file watcher stopped: {exc}")

    async def _fire_change(self, name: str, path: str, paths: list[str]) -> None:
        routine = self.loaded.valid.get(name)
        if routine is None:
            return
        firing = Firing(name, self.clock(), kind="file_change", detail={"paths": paths})
        await self.fire(routine, firing)
        save_snapshot(name, path, await asyncio.to_thread(take_snapshot, path))

    async def _catch_up_changes(self, name: str, path: str) -> None:
        """Changes made while no watcher ran (the daemon was down): one firing for
        all of them, unless the routine skips what it missed. The first watch of a
        routine only takes its snapshot."""
        now = await asyncio.to_thread(take_snapshot, path)
        before = load_snapshot(name, path)
        routine = self.loaded.valid.get(name)
        missed = changed_files(before, now) if before is not None else []
        if not missed or routine is None:
            save_snapshot(name, path, now)
        elif routine.catch_up == "skip_missed":
            await self._record(Firing(name, self.clock(), kind="file_change"), "missed")
            save_snapshot(name, path, now)
        else:
            await self._fire_change(name, path, missed)

    def notice(self, routine: str, message: str) -> None:
        log.warning("routine %s: %s", routine, message)
        self.notices[routine] = message

    # -- timeouts ---------------------------------------------------------------------------------

    async def _enforce_timeouts(self, loaded: Loaded, now: float) -> None:
        for routine in loaded.valid.values():
            if routine.timeout_s is None:
                continue
            for firing in await self.store.list_firings(routine.name, limit=_RECENT):
                if firing.job_state == JobState.RUNNING and firing.job_id:
                    await self._maybe_interrupt(firing, routine.timeout_s, now)

    async def _maybe_interrupt(self, firing: FiringRecord, timeout_s: float, now: float) -> None:
        assert firing.job_id is not None
        job = await self.store.get_job(firing.job_id)
        if job.started_at is not None and now - job.started_at > timeout_s:
            log.warning("routine %s: job %s timed out", firing.routine, job.id)
            with contextlib.suppress(ChorusError, StoreError):
                await self.sup.interrupt(job.id)

    async def follow(self) -> None:
        """On a node that does not lead the routines: what still is its own
        to do, i.e. time out the routine jobs it runs and queue its due retries."""
        await self._enforce_timeouts(self.load(), self.clock())
        await self.retries.tick()

    # -- views ----------------------------------------------------------------------------

    async def describe(self) -> list[dict[str, Any]]:
        """One row per routine for ``chorus routine list``: valid ones with their next
        fire time, last result and failing count; invalid ones with their error."""
        loaded = self.load()
        records = await self.records()
        rows = [await self._describe(r, records.get(r.name)) for r in loaded.valid.values()]
        rows += [
            {"name": bad.name, "valid": False, "error": bad.error, "file": bad.file}
            for bad in loaded.invalid
        ]
        return sorted(rows, key=lambda row: str(row["name"]))

    async def _describe(self, routine: Routine, record: RoutineRecord | None) -> dict[str, Any]:
        recent = await self.store.list_firings(routine.name, limit=_RECENT)
        return {
            "name": routine.name,
            "valid": True,
            "file": routine.file,
            "trigger": routine.kind,
            "enabled": self.is_enabled(routine, record),
            "timezone": routine.timezone,
            "body": routine.body,
            "next_fire": (
                await self.next_fire_of(routine, record)
                if self.is_enabled(routine, record)
                else None
            ),
            "last": firing_json(recent[0]) if recent else None,
            "failing": _failing(recent),
            "notice": self.notices.get(routine.name),
        }


def _failing(recent: list[FiringRecord]) -> int:
    """Consecutive failures, newest first (a success ends the count)."""
    count = 0
    for firing in recent:
        if firing.job_state == JobState.SUCCEEDED:
            break
        if firing.outcome == "error" or firing.job_state == JobState.FAILED:
            count += 1
    return count


def firing_json(firing: FiringRecord) -> dict[str, Any]:
    return {
        "routine": firing.routine,
        "scheduled_for": firing.scheduled_for,
        "kind": firing.kind,
        "outcome": firing.outcome,
        "fired_at": firing.fired_at,
        "job_id": firing.job_id,
        "job_state": None if firing.job_state is None else str(firing.job_state),
        "detail": firing.detail,
    }
