"""The supervisor: job queue → router → session, with crash recovery.

Scheduling rules:

* at most ``max_parallel_jobs`` jobs run at once;
* jobs of one session run one at a time, in submission order (a second job for a
  busy session waits behind the first);
* a paused session (``chorus talk`` has it) runs nothing until resumed.

A job runs one user turn on its session (:mod:`chorus.session`), whose body
stays warm between jobs: a follow-up reuses the same CLI process. If the body
process dies mid-turn, the job restarts it with its native resume (bounded by
``max_body_restarts``) and continues; after that the job fails with the reason.
A running job can be steered (``steer``): natively where the body can, else by
interrupt and a follow-up turn; a queued job's prompt takes the text; a
finished job gets a follow-up job on its session.
If the daemon itself dies, the store still says ``running``: on the next start
those jobs are requeued and resume natively the same way. Every event is
appended to the store (redacted, gap-free seq) before anyone sees it; a job's
last event is :class:`JobEnded`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from chorus._errors import UserError
from chorus.agents import find_login
from chorus.bodies import Body, BodyOptions, body_names, check_installed
from chorus.config import ChorusConfig, chorus_home
from chorus.daemon._budget import Ledger
from chorus.daemon._cluster import SharedHealth, StoreDownError, load_health_file
from chorus.daemon._durability import (
    Followed,
    error_info,
    kill_orphans,
    orphaned_sessions,
    reattach_bodies,
    until_stored,
)
from chorus.daemon._frameworks import FrameworkPort, framework_options
from chorus.daemon._job_run import JobRun, error_of, wire_gate
from chorus.daemon._outcomes import JobEnd, JobFailedOver, JobStarted, Outcomes, job_end
from chorus.daemon._queue import JobQueue
from chorus.daemon._routing import route_request
from chorus.events import (
    ErrorCode,
    ErrorInfo,
    Event,
    Handoff,
    JobEnded,
    Steer,
    TurnCompleted,
    TurnFailed,
)
from chorus.jobs import JobRequest
from chorus.permissions import PermissionAnswer, PermissionAsk
from chorus.policy import AuditLog, PermissionMode, Policy, SecretStore
from chorus.router import CooldownPolicy, HealthBook, Router, provider_key
from chorus.session import (
    SessionError,
    SessionHub,
    checked_mode,
    cli_name,
    make_hub,
    policy_guards,
)
from chorus.store import (
    ORIGIN_CHORUS,
    Firing,
    JobRecord,
    JobState,
    LeaseLostError,
    SessionRecord,
    Store,
    WorkerNode,
)
from chorus.worktrees import (
    finish_job_worktree,
    prepare_job_worktree,
    report_orphans,
    start_job_worktree,
)

if TYPE_CHECKING:  # the policy's engine loads with the first gate, not at the start
    from chorus.policy import PolicyGate

log = logging.getLogger("chorus.daemon")

BodyFactory = Callable[[str, BodyOptions], Body]


class Supervisor:
    """Owns the queue and every running body. Create, then ``await run()`` inside a
    task group; stop by cancelling that task (running bodies are closed).

    Its parts: :attr:`queue` (admission, ordering, the sessions' busy/paused state),
    one :class:`~chorus.daemon._job_run.JobRun` per running job, and :attr:`outcomes`
    (typed outcome events for subscribers)."""

    def __init__(
        self,
        store: Store,
        config: ChorusConfig,
        *,
        body_factory: BodyFactory | None = None,
        policy: Policy | None = None,
        audit: AuditLog | None = None,
        secrets: SecretStore | None = None,
        hub: SessionHub | None = None,
    ) -> None:
        self.store = store
        self.config = config
        # Without a policy (tests of the queue alone) every tool is allowed.
        self.policy = policy
        self.audit = audit
        self.secrets = secrets
        self._own_hub = hub is None
        if hub is None:  # a supervisor used alone (tests of the queue); the daemon shares one
            guards = policy_guards(policy, audit, secrets)
            hub = make_hub(config, store, guards=guards, factory=body_factory)
        self.hub = hub
        rc = config.router
        known = body_names(config)
        self.router = Router(
            [b for b in rc.bodies if b in known], strategy=rc.strategy, matrix=rc.matrix
        )
        self.health = HealthBook(
            CooldownPolicy(rc.cooldown_base_s, rc.cooldown_max_s, rc.cooldown_multiplier)
        )
        self.health.load(load_health_file())
        self.frameworks = FrameworkPort(self)
        #: Typed job outcomes (started, failed over, ended) for subscribers.
        self.outcomes = Outcomes()
        #: Extra fields for ``status()`` (e.g. the retry queue's ``pending_retries``).
        self.status_hooks: list[Callable[[], dict[str, Any]]] = []
        self.started_at = time.time()
        #: Today's spend and each job's, fed from the log (``[budget]``).
        self.ledger = Ledger()
        # this daemon is a worker node of the store's queue (claims with leases).
        sc = config.store
        self.node = WorkerNode(
            store,
            bodies=rc.bodies,
            lease_s=sc.lease_s,
            max_claims=sc.max_claims,
            host=sc.host,
            shared_paths=sc.shared_paths,
            on_lost=self._taken_over,
        )
        self.queue = JobQueue(store, self.node, lambda: self.config.daemon.max_parallel_jobs)
        store.on_jobs_queued(self.queue.wake)
        self.shared_health = SharedHealth(store, self.health, self.node.id)
        self._runs: dict[str, JobRun] = {}
        #: Turns of bodies re-attached at start, until their jobs are claimed again.
        self._followed: dict[str, Followed] = {}

    # -- submitting -------------------------------------------------------------------------

    async def submit(self, req: JobRequest) -> JobRecord:
        """Validate and queue a job. Bad input raises :class:`UserError` and writes nothing."""
        if not req.prompt.strip():
            raise UserError("the prompt is empty")
        if refusal := self.refusal():  # the shared database is away too long
            raise StoreDownError(refusal)
        _checked_mode(req.permission_mode)
        known = body_names(self.config)
        framework = framework_options(req.framework, req.planners, req.reviewer, req.rounds, known)
        req, routed = await route_request(self, req)  # the body and why
        async with prepare_job_worktree(self.store, self.config, req) as wt:
            session = await self._session_for(replace(req, cwd=wt.cwd))
            options = {"model": req.model, "permission_mode": req.permission_mode, **framework}
            if req.failover is False:
                options["failover"] = False
            firing = req.firing if isinstance(req.firing, Firing) else None
            options = {**options, **wt.options}
            job = await self.queue.add(
                req.prompt, session, options, job_id=wt.job_id, firing=firing
            )
        await self.note(job, routed)
        self.queue.wake()
        return job

    async def _session_for(self, req: JobRequest) -> SessionRecord:
        if req.session_id:
            session = await self.store.get_session(req.session_id)
            if req.body and req.body != session.body:
                raise UserError(f"session {session.id} belongs to body {session.body!r}")
            return session
        body = req.body or self._route(req.prompt)
        check_installed(body, self.config)
        cwd = _checked_dir(req.cwd)
        return await self.store.create_session(body, model=req.model, cwd=str(cwd))

    def _route(self, prompt: str) -> str:
        """The router's pick for a job without ``--body``: healthy and preferred."""
        choice = self.router.choose(
            prompt, self.health, time.time(), key=self.provider_key, unready=self.unready
        )
        if choice is None:
            prefs = self.router.preferences(prompt)
            if not prefs:
                raise UserError("no body is configured for routing ([router] bodies)")
            choice = prefs[0]  # all cooling down: queue on the first, it will wait
        return choice

    # -- bodies' health -------------------------------------------------------------------------

    def unready(self, body: str) -> str | None:
        """Why ``body`` cannot run at all (its CLI has no login), or None."""
        agent = self.config.agents.get(cli_name(body))
        login = find_login(body, agent.env if agent else {})
        return None if login.usable else login.describe()

    def provider_key(self, body: str) -> str:
        """Health is kept per body and credential: ``body@<fingerprint>`` of the API key
        the body would run with (``body@default`` when it uses the CLI's own login)."""
        agent = self.config.agents.get(cli_name(body))
        env = {**os.environ, **(agent.env if agent else {})}
        return provider_key(body, env)

    async def credit_success(self, body: str) -> None:
        """``body`` completed a turn (the router's success stats)."""
        self.health.success(self.provider_key(body))
        await self.shared_health.save(self.provider_key(body))

    async def credit_failure(self, body: str, error: ErrorInfo) -> None:
        self.health.failure(self.provider_key(body), error, time.time())
        await self.shared_health.save(self.provider_key(body))

    # -- controlling ------------------------------------------------------------------------

    async def interrupt(self, job_id: str) -> str:
        """Interrupt a running job or cancel a queued one; returns what was done."""
        job = await self.store.get_job(job_id)
        if job.state == JobState.QUEUED:
            await self._end(job, "cancelled", None, result=None)
            return "cancelled"
        run = self._runs.get(job_id)
        if job.state != JobState.RUNNING or run is None or not await run.interrupt():
            return f"not running ({job.state})"
        return "interrupted"

    async def steer(self, job_id: str, text: str) -> dict[str, Any]:
        """Add ``text`` to a job: to its running turn (natively or emulated), to its
        prompt while it is queued, or as a follow-up job on its session once it has
        ended. Every steer is an event in the log. Raises :class:`UserError` for an
        empty text, :class:`UnknownJobError` for an unknown job (nothing written)."""
        if not text.strip():
            raise UserError("the steer text is empty")
        async with self.queue.lock:
            job = await self.store.get_job(job_id)
            if job.state == JobState.QUEUED:
                await self.store.update_job(job.id, prompt=f"{job.prompt}\n\n{text}")
                await self.note(job, Steer(text=text, native=False))
                return {"job_id": job.id, "how": "added_to_prompt"}
        run = self._runs.get(job_id)
        if job.state == JobState.RUNNING and run is not None and run.session is not None:
            with contextlib.suppress(SessionError):  # the turn may end meanwhile
                return {"job_id": job_id, "how": await run.session.steer(text)}
        return await self._steer_followup(job, text)

    async def _steer_followup(self, job: JobRecord, text: str) -> dict[str, Any]:
        options = {k: v for k, v in job.options.items() if k in ("model", "permission_mode")}
        follow = await self.queue.follow_up(job, text, {**options, "steer_of": job.id})
        await self.note(follow, Steer(text=text, native=False))
        self.queue.wake()
        return {"job_id": job.id, "how": "queued_followup", "followup_job_id": follow.id}

    async def pause(self, session_id: str) -> None:
        """Run no new job of the session, and close its body once it is free (so the
        CLI's own TUI can take the session over, as ``chorus talk`` does)."""
        if self.queue.pause(session_id):
            await self.hub.close(session_id)

    def resume(self, session_id: str) -> None:
        self.queue.resume(session_id)

    def wake(self) -> None:
        """Look at the queue now (a job was queued from inside the daemon)."""
        self.queue.wake()

    def is_busy(self, session_id: str) -> bool:
        return self.queue.is_busy(session_id)

    async def note(self, job: JobRecord, event: Event) -> Event:
        """Append an event Chorus made to the job's log (notices, handoffs, steers)."""
        tagged = event.model_copy(update={"job_id": job.id})
        if self.audit is not None and isinstance(tagged, Handoff):
            self.audit.record_event(tagged)
        return await self.store.append(job.session_id or "", tagged, origin=ORIGIN_CHORUS)

    async def tell_desktop(self, title: str, text: str) -> None:
        """A desktop notification, when ``[daemon] notifications`` is on."""
        if self.config.daemon.notifications:
            await _notify(title, text)

    # -- what runs ------------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        return {
            "pid": os.getpid(),
            "started_at": self.started_at,
            "running_jobs": sorted(self._runs),
            "live_sessions": [
                {"id": s.id, "body": s.body_name, "state": str(s.state), "queued": s.pending}
                for s in self.hub.sessions()
            ],
            "spare_bodies": self.hub.spares.describe(),
            "busy_sessions": self.queue.busy(),
            "paused_sessions": self.queue.paused(),
            "max_parallel_jobs": self.config.daemon.max_parallel_jobs,
            "health": self.health.to_json(),
            "needs_login": {b: why for b in self.router.bodies if (why := self.unready(b))},
            **self._cluster_status(),
            **{k: v for hook in self.status_hooks for k, v in hook().items()},
        }

    def refusal(self) -> str | None:
        """Why this daemon takes no new job now (the shared database has been away so
        long that its buffer of writes is full), or None."""
        outage = self.store.outage()
        if outage is None or not outage.full:
            return None
        return f"not accepting new jobs: {outage.describe()}; they resume once it is back"

    def _cluster_status(self) -> dict[str, Any]:
        """this node, and the store's outage while there is one."""
        outage = self.store.outage()
        return {
            "node": {"id": self.node.id, "host": self.node.host, "running": sorted(self._runs)},
            "store_outage": None if outage is None else outage.describe(),
            "accepting_jobs": self.refusal() is None,
        }

    def running_on(self, session_id: str) -> tuple[str | None, str | None]:
        """The job running on a session now and the body it runs on; (None, the live
        body or None) between jobs."""
        for job_id, run in self._runs.items():
            if run.session is not None and run.session.id == session_id:
                return job_id, run.session.body_name
        live = self.hub.get(session_id)
        return None, (live.body_name if live is not None else None)

    def failed_over_from(self, job: JobRecord) -> list[str]:
        """The bodies ``job`` left on failover, in order (its record names the last)."""
        run = self._runs.get(job.id)
        if run is not None:
            return list(run.failed_over_from)
        return failed_over_from(job)

    # -- the scheduling loop ------------------------------------------------------------

    async def run(self) -> None:
        """Requeue jobs a dead daemon left running, then schedule forever (running the
        session hub too when the supervisor made its own)."""
        if self._own_hub:
            async with self.hub.running():
                await self._serve()
        else:
            await self._serve()

    async def _serve(self) -> None:
        requeued = await self.node.recover()
        for job in requeued:
            log.info("requeued job %s after restart", job.id)
        only = orphaned_sessions(requeued) if self.store.shared else None
        self._followed = await reattach_bodies(self.hub, requeued, self.job_gate, only)
        await kill_orphans(self.hub, only=only)
        await report_orphans(self.store, self.config)  # logged, never deleted
        await self.shared_health.load()
        leases = asyncio.create_task(self.node.keep_leases(), name="job-leases")
        health = asyncio.create_task(self.shared_health.follow(), name="shared-health")
        try:
            while True:
                await self._claim_jobs()
                await self.queue.wait(1.0)
        finally:
            leases.cancel()
            health.cancel()
            tasks = [run.task for run in self._runs.values() if run.task is not None]
            for task in tasks:
                task.cancel()
            await asyncio.gather(leases, health, *tasks, return_exceptions=True)

    async def _claim_jobs(self) -> None:
        async with self.queue.lock:
            while (job := await self.queue.claim()) is not None:
                run = JobRun(self, job, self._followed.pop(job.id, None))
                self._runs[job.id] = run
                run.task = asyncio.create_task(self._run_job(run), name=f"job-{job.id}")
                run.task.add_done_callback(self._job_done)

    def _job_done(self, task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            log.error("job task crashed", exc_info=task.exception())
        self.queue.wake()

    async def _still_ours(self, job: JobRecord) -> bool:
        """False when the job went back to the queue or to another node while it ran
        here (this node's lease lapsed): its outcome here must not end it."""
        fresh = await self.store.get_job(job.id)
        mine = fresh.node in (None, self.node.id)
        if fresh.state is JobState.QUEUED or (fresh.state is JobState.RUNNING and not mine):
            _say_where(fresh)
            return False
        return True

    async def _taken_over(self, job_id: str) -> None:
        """this node's lease on the job lapsed and the job went back to the
        queue or to another node: stop running it here, without ending it."""
        log.warning("job %s: closing its body here; the job is not ended", job_id)
        job = await self.store.get_job(job_id)
        _say_where(job)  # the run's task is cancelled: its end may never say it
        if job.session_id is not None:
            await self.hub.close(job.session_id)  # its turn ends; _still_ours says no
        run = self._runs.get(job_id)
        if run is not None and run.task is not None:
            run.task.cancel()

    # -- running one job ----------------------------------------------------------------

    async def _run_job(self, run: JobRun) -> None:
        """Run the job and end it (JobEnded); its session's body stays warm for the next."""
        job = run.job
        try:
            await self.outcomes.publish(JobStarted(job))
            try:
                refused = await start_job_worktree(self.store, job)  # the guard
                final = refused or await run.attempts()
            except Exception as exc:  # the job must end with a reason, whatever broke
                log.exception("job %s failed inside Chorus", job.id)
                final = TurnFailed(error=error_info(exc))
            await finish_job_worktree(self.store, job)  # commit leftovers, unlock
            # Fenced by its claim's lease (one statement), or checked without one.
            if job.lease is not None or await self._still_ours(job):
                await self._finish(run, final)
        finally:
            self._runs.pop(job.id, None)
            if job.session_id is not None and self.queue.is_paused(job.session_id):
                await self.hub.close(job.session_id)
            self.queue.release(job.session_id)

    async def direct(self, job: JobRecord, prompt: str, plan: str | None = None) -> Event:
        """Run one turn of a running job until it ends for good (see
        :meth:`JobRun.direct`); a framework's turns come here."""
        run = self._runs.get(job.id)
        if run is None:
            raise UserError(f"job {job.id} is not running here")
        return await run.direct(prompt, plan)

    def job_gate(
        self, job: JobRecord, session: SessionRecord, mode: str | None
    ) -> PolicyGate | None:
        """A new policy gate for one turn of ``job`` (None without a policy)."""
        if self.policy is None:
            return None
        gate = self.hub.gate(session, mode)
        if gate is not None:
            wire_gate(self, job, gate)
        return gate

    async def answered(self, job_id: str, ask: PermissionAsk, answer: PermissionAnswer) -> None:
        """The gate of a job's turn answered a permission ask (see :meth:`JobRun.answered`)."""
        run = self._runs.get(job_id)
        if run is not None:
            await run.answered(ask, answer)

    # -- outcomes -------------------------------------------------------------------------

    async def _finish(self, run: JobRun, final: Event) -> None:
        if isinstance(final, TurnCompleted):
            await self._end(run.job, "succeeded", None, result=final.result, run=run)
            return
        error = error_of(final)
        if run.interrupted:
            error = ErrorInfo(code=ErrorCode.INTERRUPTED, message="interrupted by the user")
            await self._end(run.job, "cancelled", error, result=None, run=run)
            return
        await self._end(run.job, "failed", error, result=None, run=run)

    async def _end(
        self,
        job: JobRecord,
        state: str,
        error: ErrorInfo | None,
        *,
        result: str | None,
        run: JobRun | None = None,
    ) -> None:
        """Move the job to ``state`` and append its JobEnded in one transaction, credited
        to the body it ended on; then tell the subscribers."""
        fresh = await self.store.get_job(job.id)
        body = run.body if run is not None else None
        left = list(run.failed_over_from) if run is not None else []
        ended = JobEnded(
            state=state,
            error=error,
            result=result,
            attempts=fresh.attempts,
            body=body or "",
            failed_over_from=left,
        )
        lease = job.lease  # the claim's: only while it holds does this end the job
        try:
            fresh, stamped = await until_stored(
                lambda: self.store.end_job(
                    job.id,
                    JobState(state),
                    ended,
                    result=_stored_result(state, result, left),
                    error=error.model_dump() if error is not None else None,
                    lease=lease,
                ),
                f"ending job {job.id}",
            )
        except LeaseLostError:  # it went elsewhere, and may even have ended there
            _say_where(await self.store.get_job(job.id))
            return
        assert isinstance(stamped, JobEnded)
        self.frameworks.ended(fresh)
        await self.outcomes.publish(job_end(fresh, stamped, body or fresh.body, tuple(left)))


def _say_where(fresh: JobRecord) -> None:
    """Log where a job this node lost went (its lease lapsed while it ran here)."""
    where = f"node {fresh.node}" if fresh.node else "the queue"
    log.warning("job %s went to %s while it ran here; not ending it", fresh.id, where)


def _stored_result(state: str, text: str | None, left: list[str]) -> dict[str, Any] | None:
    """The job record's result: its text when it succeeded, and the bodies it left."""
    result: dict[str, Any] = {"text": text} if state == "succeeded" else {}
    if left:
        result["failed_over_from"] = left
    return result or None


def failed_over_from(job: JobRecord) -> list[str]:
    """The bodies an ended job left on failover, from its stored result."""
    left = (job.result or {}).get("failed_over_from")
    return [str(b) for b in left] if isinstance(left, list) else []


def _checked_dir(raw: str | None) -> Path:
    cwd = Path(raw or os.getcwd()).expanduser().resolve()
    if not cwd.is_dir():
        raise UserError(f"working directory {cwd} does not exist")
    _outside_chorus_home(cwd)
    return cwd


#: The folders of CHORUS_HOME a job may work in.
_JOB_FOLDERS_IN_HOME = ("workspace", "worktrees")


def _outside_chorus_home(cwd: Path) -> None:
    """A job never works inside CHORUS_HOME (its folder would be the body's writable
    root: the policy, the audit log, the keys), except in a job worktree there
    (``CHORUS_HOME/worktrees``, the default root) and in the workspace, which the
    heartbeat's jobs work in and every sandbox keeps read-only."""
    home = chorus_home().resolve()
    if not cwd.is_relative_to(home):
        return
    if any(cwd.is_relative_to(home / part) for part in _JOB_FOLDERS_IN_HOME):
        return
    raise UserError(
        f"working directory {cwd} is inside CHORUS_HOME ({home}), which no job may work "
        "in; run it from your project's folder (or give --cwd)"
    )


async def _notify(title: str, body: str) -> None:
    """A desktop notification where the platform has one (notify-send, osascript)."""
    if shutil.which("notify-send"):
        argv = ["notify-send", title, body]
    elif shutil.which("osascript"):
        argv = ["osascript", "-e", f"display notification {body!r} with title {title!r}"]
    else:
        return
    with contextlib.suppress(OSError):
        proc = await asyncio.create_subprocess_exec(
            *argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(proc.wait(), 5)


async def notify_desktop(end: JobEnd) -> None:
    """Outcome subscriber: tell the desktop a job ended."""
    await _notify(f"Chorus job {end.ended.state}", end.job.prompt[:120])


async def notify_failover(moved: JobFailedOver) -> None:
    """Outcome subscriber: tell the desktop a job moved to another body."""
    handoff = moved.handoff
    title = f"Chorus failover: {handoff.from_body} → {handoff.to_body}"
    await _notify(title, f"{handoff.reason.code}: {moved.job.prompt[:100]}")


def _checked_mode(mode: str | None) -> PermissionMode | None:
    try:
        return checked_mode(mode)
    except SessionError as exc:
        raise UserError(exc.message) from exc
