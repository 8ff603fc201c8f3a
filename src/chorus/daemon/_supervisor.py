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
import functools
import logging
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from chorus._errors import UserError
from chorus.agents import find_login
from chorus.bodies import Body, BodyOptions, body_names, check_installed
from chorus.config import BrainConfig, ChorusConfig, chorus_home
from chorus.context import Brief
from chorus.daemon._budget import Ledger, budget_error, refusal
from chorus.daemon._cluster import SharedHealth, StoreDownError, load_health_file
from chorus.daemon._durability import Followed, error_info, follow, reattach_bodies, until_stored
from chorus.daemon._frameworks import FrameworkPort, framework_options
from chorus.daemon._routing import route_request
from chorus.events import (
    ErrorCode,
    ErrorInfo,
    Event,
    Handoff,
    JobEnded,
    Notice,
    PermissionDecision,
    SessionEnded,
    Steer,
    TurnCompleted,
    TurnFailed,
)
from chorus.jobs import JobRequest
from chorus.permissions import PermissionAnswer, PermissionAsk
from chorus.policy import (
    AuditLog,
    PermissionMode,
    Policy,
    PolicyGate,
    SecretStore,
    Verdict,
    Vote,
    denial_notice,
)
from chorus.router import CooldownPolicy, HealthBook, Router, build_bundle, provider_key
from chorus.session import (
    BodyLauncher,
    HubLimits,
    Session,
    SessionError,
    SessionHub,
    Turn,
    checked_mode,
    cli_name,
    native_mode,
    policy_guards,
    start_time,
)
from chorus.store import (
    ORIGIN_CHORUS,
    Firing,
    JobRecord,
    JobState,
    SessionRecord,
    Store,
    WorkerNode,
)
from chorus.worktrees import (
    finish_job_worktree,
    guard_job_worktree,
    job_worktree,
    prepare_job_worktree,
    report_orphans,
    start_job_worktree,
)

log = logging.getLogger("chorus.daemon")

BodyFactory = Callable[[str, BodyOptions], Body]
#: Hook run on every job outcome: (job, final event) → None (notifications, health).
OutcomeHook = Callable[[JobRecord, JobEnded], Awaitable[None]]
#: Hook run on every failover: (job, handoff event) → None (audit, notifications).
FailoverHook = Callable[[JobRecord, Handoff], Awaitable[None]]


class Supervisor:
    """Owns the queue and every running body. Create, then ``await run()`` inside a
    task group; stop by cancelling that task (running bodies are closed)."""

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
        self.hub = (
            _own_hub(store, config, body_factory, policy, audit, secrets) if hub is None else hub
        )
        self._gates: dict[str, PolicyGate] = {}
        self._untold: dict[str, list[str]] = {}
        rc = config.router
        known = body_names(config)
        self.router = Router(
            [b for b in rc.bodies if b in known], strategy=rc.strategy, matrix=rc.matrix
        )
        self.health = HealthBook(
            CooldownPolicy(rc.cooldown_base_s, rc.cooldown_max_s, rc.cooldown_multiplier)
        )
        self.health.load(load_health_file())
        self._wake = asyncio.Event()
        self._busy: set[str] = set()
        self._paused: set[str] = set()
        self._live: dict[str, Session] = {}
        self._claim = asyncio.Lock()
        self._interrupted: set[str] = set()
        self._follow: dict[str, Followed] = {}  # turns re-attached bodies run
        self._tasks: set[asyncio.Task[None]] = set()
        self.outcome_hooks: list[OutcomeHook] = []
        self.frameworks = FrameworkPort(self)
        self.failover_hooks: list[FailoverHook] = []
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
        store.on_jobs_queued(self._wake.set)
        self.shared_health = SharedHealth(store, self.health, self.node.id)

    # -- submitting and controlling -------------------------------------------------

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
            job = await self._create(req, session, {**options, **wt.options}, wt.job_id)
        await self._append(job, routed)
        self._wake.set()
        return job

    async def _create(
        self, req: JobRequest, session: SessionRecord, options: dict[str, Any], job_id: str | None
    ) -> JobRecord:
        """Queue the job; a routine's job with its firing, in one transaction."""
        where: dict[str, str | None] = {"body": session.body, "session_id": session.id}
        where["affinity"] = self.node.affinity_for(session.cwd)  # host-local cwd
        if isinstance(req.firing, Firing):
            options = {**options, "fired_by": self.node.id}
            return await self.store.create_fired_job(
                req.firing, req.prompt, options=options, **where
            )
        return await self.store.create_job(req.prompt, options=options, job_id=job_id, **where)

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

    def _logins_missing(self) -> dict[str, str]:
        """The routed bodies that cannot run, and why (``status`` shows them)."""
        return {b: why for b in self.router.bodies if (why := self.unready(b))}

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

    async def _health_success(self, body: str) -> None:
        self.health.success(self.provider_key(body))
        await self.shared_health.save(self.provider_key(body))

    async def _health_failure(self, body: str, error: ErrorInfo) -> None:
        self.health.failure(self.provider_key(body), error, time.time())
        await self.shared_health.save(self.provider_key(body))

    async def interrupt(self, job_id: str) -> str:
        """Interrupt a running job or cancel a queued one; returns what was done."""
        job = await self.store.get_job(job_id)
        if job.state == JobState.QUEUED:
            await self._end(job, "cancelled", None, result=None)
            return "cancelled"
        session = self._live.get(job_id)
        if job.state != JobState.RUNNING or session is None:
            return f"not running ({job.state})"
        self._interrupted.add(job_id)
        await session.interrupt()
        return "interrupted"

    async def steer(self, job_id: str, text: str) -> dict[str, Any]:
        """Add ``text`` to a job: to its running turn (natively or emulated), to its
        prompt while it is queued, or as a follow-up job on its session once it has
        ended. Every steer is an event in the log. Raises :class:`UserError` for an
        empty text, :class:`UnknownJobError` for an unknown job (nothing written)."""
        if not text.strip():
            raise UserError("the steer text is empty")
        async with self._claim:
            job = await self.store.get_job(job_id)
            if job.state == JobState.QUEUED:
                return await self._steer_queued(job, text)
        session = self._live.get(job_id)
        if job.state == JobState.RUNNING and session is not None:
            with contextlib.suppress(SessionError):  # the turn may end meanwhile
                how = await session.steer(text)
                return {"job_id": job_id, "how": how}
        return await self._steer_followup(job, text)

    async def _steer_queued(self, job: JobRecord, text: str) -> dict[str, Any]:
        await self.store.update_job(job.id, prompt=f"{job.prompt}\n\n{text}")
        await self._append(job, Steer(text=text, native=False))
        return {"job_id": job.id, "how": "added_to_prompt"}

    async def _steer_followup(self, job: JobRecord, text: str) -> dict[str, Any]:
        options = {k: v for k, v in job.options.items() if k in ("model", "permission_mode")}
        follow = await self.store.create_job(
            text,
            body=job.body,
            session_id=job.session_id,
            options={**options, "steer_of": job.id},
            affinity=job.affinity,
        )
        await self._append(follow, Steer(text=text, native=False))
        self._wake.set()
        return {"job_id": job.id, "how": "queued_followup", "followup_job_id": follow.id}

    async def pause(self, session_id: str) -> None:
        """Run no new job of the session, and close its body once it is free (so the
        CLI's own TUI can take the session over, as ``chorus talk`` does)."""
        self._paused.add(session_id)
        if session_id not in self._busy:
            await self.hub.close(session_id)

    def resume(self, session_id: str) -> None:
        self._paused.discard(session_id)
        self._wake.set()

    def wake(self) -> None:
        """Look at the queue now (a job was queued from inside the daemon)."""
        self._wake.set()

    async def note(self, job: JobRecord, event: Event) -> Event:
        """Append an event Chorus made to the job's log."""
        return await self._append(job, event)

    def is_busy(self, session_id: str) -> bool:
        return session_id in self._busy

    def status(self) -> dict[str, Any]:
        return {
            "pid": os.getpid(),
            "started_at": self.started_at,
            "running_jobs": sorted(self._live),
            "live_sessions": [
                {"id": s.id, "body": s.body_name, "state": str(s.state), "queued": s.pending}
                for s in self.hub.sessions()
            ],
            "spare_bodies": self.hub.spares.describe(),
            "busy_sessions": sorted(self._busy),
            "paused_sessions": sorted(self._paused),
            "max_parallel_jobs": self.config.daemon.max_parallel_jobs,
            "health": self.health.to_json(),
            "needs_login": self._logins_missing(),
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
            "node": {"id": self.node.id, "host": self.node.host, "running": sorted(self._live)},
            "store_outage": None if outage is None else outage.describe(),
            "accepting_jobs": self.refusal() is None,
        }

    async def _still_ours(self, job: JobRecord) -> bool:
        """False when the job went back to the queue or to another node while it ran
        here (this node's lease lapsed): its outcome here must not end it."""
        fresh = await self.store.get_job(job.id)
        mine = fresh.node in (None, self.node.id)
        if fresh.state is JobState.QUEUED or (fresh.state is JobState.RUNNING and not mine):
            where = f"node {fresh.node}" if fresh.node else "the queue"
            log.warning("job %s went to %s while it ran here; not ending it", job.id, where)
            return False
        return True

    async def _taken_over(self, job_id: str) -> None:
        """this node's lease on the job lapsed and the job went back to the
        queue or to another node: stop running it here, without ending it."""
        log.warning("job %s: closing its body here; the job is not ended", job_id)
        job = await self.store.get_job(job_id)
        if job.session_id is not None:
            await self.hub.close(job.session_id)  # its turn ends; _still_ours says no
        for task in list(self._tasks):
            if task.get_name() == f"job-{job_id}":
                task.cancel()

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
        only = _sessions_of(requeued) if self.store.shared else None
        self._follow = await reattach_bodies(self.hub, requeued, self._gate, only)
        await self._kill_orphans(only=only)
        await report_orphans(self.store, self.config)  # logged, never deleted
        await self.shared_health.load()
        leases = asyncio.create_task(self.node.keep_leases(), name="job-leases")
        health = asyncio.create_task(self.shared_health.follow(), name="shared-health")
        try:
            while True:
                await self._schedule()
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), 1.0)
        finally:
            leases.cancel()
            health.cancel()
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(leases, health, *self._tasks, return_exceptions=True)

    async def _schedule(self) -> None:
        async with self._claim:
            await self._claim_jobs()

    async def _claim_jobs(self) -> None:
        limit = self.config.daemon.max_parallel_jobs
        while self.store.outage() is None:  # no claims while the shared database is away
            # A framework's child jobs run while their parent waits in its slot.
            exclude = self._busy | self._paused
            job = await self.node.claim(exclude, system_only=len(self._busy) >= limit)
            if job is None:
                return
            self._busy.add(job.session_id or "")
            task = asyncio.create_task(self._run_job(job), name=f"job-{job.id}")
            self._tasks.add(task)
            task.add_done_callback(self._job_done)

    def _job_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("job task crashed", exc_info=task.exception())
        self._wake.set()

    async def _kill_orphans(self, only: set[str] | None = None) -> None:
        """Bodies a killed daemon left (a running job's, or a warm idle one) still run in
        their own process groups: end them so a resumed one does not race them on the
        same native session, and no idle CLI lingers. ``only``: just these sessions (on
        a shared store the other active sessions belong to live nodes)."""
        for session in await self.store.list_sessions(state="active", limit=10_000):
            if self.hub.get(session.id) is None and (only is None or session.id in only):
                self._kill_orphan(session)

    def _kill_orphan(self, session: SessionRecord) -> None:
        pgid = session.transport.get("pgid")
        started = session.transport.get("pgid_started")
        # Only the very process we started: a pid reused since (e.g. after a reboot)
        # has another start time, and is left alone.
        if isinstance(pgid, int) and pgid > 1 and started == start_time(pgid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)

    # -- running one job ----------------------------------------------------------------

    async def _run_job(self, job: JobRecord) -> None:
        """Run the job and end it (JobEnded); its session's body stays warm for the next."""
        try:
            try:
                refused = await start_job_worktree(self.store, job)  # the guard
                final = refused or await self._attempts(job)
            except Exception as exc:  # the job must end with a reason, whatever broke
                log.exception("job %s failed inside Chorus", job.id)
                final = TurnFailed(error=error_info(exc))
            await finish_job_worktree(self.store, job)  # commit leftovers, unlock
            if await self._still_ours(job):  # not re-queued or taken over meanwhile
                await self._finish(job, final)
        finally:
            self._gates.pop(job.id, None)
            self._untold.pop(job.id, None)
            self._live.pop(job.id, None)
            if job.session_id in self._paused:
                await self.hub.close(job.session_id)
            self._busy.discard(job.session_id or "")

    async def _attempts(self, job: JobRecord) -> Event:
        """Run the job: on one body, or under its thinking framework."""
        framework = job.options.get("framework")
        if isinstance(framework, str) and framework != "direct":
            return await self.frameworks.run(job, framework)
        first = job.prompt if job.attempts <= 1 else _continue_prompt(job.prompt)
        return await self.direct(job, first)

    async def direct(self, job: JobRecord, prompt: str, plan: str | None = None) -> Event:
        """Run one turn of the job until it ends for good: restart crashed bodies, retry
        rate limits, fail over on quota, wait for a cooldown when nothing is healthy.
        ``plan``: the job's plan (a framework's), for the context of a body it starts."""
        session = await self.store.get_session(job.session_id or "")
        run = _Run(body=_active_body(session), original=_active_body(session), plan=plan)
        run.prompt = await self._with_untold_denials(session.id, prompt)
        while True:
            if (over := await self._over_budget(job, run.body)) is not None:
                return over
            final = await self._one_attempt(job, run.body, run.prompt, run.plan)
            if (refused := await self._meter_refused(job)) is not None:  # [budget] per request
                return refused
            if not isinstance(final, TurnFailed) or job.id in self._interrupted:
                if isinstance(final, TurnCompleted):
                    await self._health_success(run.body)
                return final
            if not await self._recover(job, run, final.error):
                return final

    async def _over_budget(self, job: JobRecord, body: str) -> TurnFailed | None:
        """A ``[budget]`` limit reached: the job stops before spending more."""
        why = refusal(self.ledger, self.config.budget, job.id, body)
        return None if why is None else await self._budget_stop(job, why)

    async def _meter_refused(self, job: JobRecord) -> TurnFailed | None:
        """The meter refused one of the job's model requests (a ``[budget]`` limit
        reached mid-turn): the job ends with that, whatever its CLI made of the 400."""
        why = self.ledger.refused.pop(job.id, None)
        return None if why is None else await self._budget_stop(job, why)

    async def _budget_stop(self, job: JobRecord, why: str) -> TurnFailed:
        await self._append(job, Notice(message=f"stopped: {why}", kind="budget"))
        if self.config.daemon.notifications:
            await _notify("Chorus budget reached", f"{why}: {job.prompt[:80]}")
        return TurnFailed(error=budget_error(why))

    def running_on(self, session_id: str) -> tuple[str | None, str | None]:
        """The job running on a session now and the body it runs on; (None, the live
        body or None) between jobs."""
        for job_id, session in self._live.items():
            if session.id == session_id:
                return job_id, session.body_name
        live = self.hub.get(session_id)
        return None, (live.body_name if live is not None else None)

    async def _recover(self, job: JobRecord, run: _Run, error: ErrorInfo) -> bool:
        """Decide what to do after a failed turn; False means the job fails with it."""
        router = self.config.router
        if error.code == ErrorCode.BODY_CRASHED:
            if run.crashes >= self.config.daemon.max_body_restarts:
                return False
            run.crashes += 1
            limit = self.config.daemon.max_body_restarts
            msg = f"body crashed; resuming natively (restart {run.crashes} of {limit})"
            await self._append(job, Notice(message=msg, kind="recovery"))
            run.prompt = _continue_prompt(job.prompt)
            return True
        if error.code not in _FAILS_OVER:
            return False
        if error.code == ErrorCode.RATE_LIMITED and run.rate_retries < router.rate_limit_retries:
            run.rate_retries += 1
            delay = error.retry_after_s or router.rate_limit_delay_s
            msg = f"{run.body} is rate limited; retrying in {delay:.1f}s before any failover"
            await self._append(job, Notice(message=msg, kind="retry"))
            await asyncio.sleep(delay)
            run.prompt = _continue_prompt(job.prompt)
            return True
        await self._health_failure(run.body, error)
        if not router.failover or job.options.get("failover") is False or run.waits >= _MAX_WAITS:
            return False
        return await self._failover(job, run, error)

    async def _failover(self, job: JobRecord, run: _Run, error: ErrorInfo) -> bool:
        """Hand the job to the next healthy body, or wait for the earliest reset."""
        now = time.time()
        nxt = self.router.choose(
            job.prompt,
            self.health,
            now,
            exclude=run.tried,
            key=self.provider_key,
            unready=self.unready,
        )
        if nxt is None:
            return await self._wait_for_reset(job, run)
        session = await self.store.get_session(job.session_id or "")
        events = [e for e in await self.store.read_events(session.id) if e.job_id == job.id]
        bundle = build_bundle(
            task=job.prompt,
            from_body=run.body,
            failure=error,
            events=events,
            cwd=Path(session.cwd or "."),
            token_budget=self.config.router.handoff_tokens,
            worktree=await job_worktree(self.store, job),
        )
        prompt = bundle.render()
        handoff = Handoff(from_body=run.body, to_body=nxt, reason=error, bundle_chars=len(prompt))
        await self._append(job, handoff)
        await self._set_active_body(session, nxt)
        for hook in self.failover_hooks:
            with contextlib.suppress(Exception):
                await hook(job, handoff)
        run.body, run.prompt = nxt, prompt
        run.plan = "\n".join(bundle.plan) or run.plan  # the next body's context has it
        run.tried.append(nxt)
        return True

    async def _wait_for_reset(self, job: JobRecord, run: _Run) -> bool:
        """No body is healthy: wait until the earliest reset, then resume natively
        on the original body."""
        candidates = [b for b in self.router.bodies] or [run.original]
        wake = self.health.earliest_reset([self.provider_key(b) for b in candidates])
        delay = max(0.0, min(wake - time.time(), self.config.router.max_wait_s))
        msg = f"no healthy body; waiting {delay:.1f}s for the earliest reset"
        await self._append(job, Notice(message=msg, kind="waiting"))
        await asyncio.sleep(delay)
        session = await self.store.get_session(job.session_id or "")
        await self._set_active_body(session, run.original)
        run.waits += 1
        run.body = run.original
        run.tried = [run.original]
        run.prompt = _continue_prompt(job.prompt)
        return True

    async def _tell_denial(self, job: JobRecord, session: Session) -> None:
        """Make sure the model learns why a tool was denied. Claude carries the reason in
        the tool result itself; Codex's decline carries none, so the reason is steered
        into the running turn; bodies that cannot steer get it with the next prompt."""
        gate = self._gates.get(job.id)
        if gate is None:
            return
        reasons = gate.take_denials(told=session.body.tells_denials)
        if not reasons:
            return
        if session.steers_natively:
            try:
                await session.steer(denial_notice(reasons))
                return
            except Exception:
                pass
        self._untold.setdefault(job.id, []).extend(reasons)

    async def _keep_denials(self, job: JobRecord, session: SessionRecord) -> None:
        """Reasons no turn could carry wait in the session for its next prompt."""
        reasons = self._untold.pop(job.id, [])
        if not reasons:
            return
        fresh = await self.store.get_session(session.id)
        waiting = [*fresh.transport.get("untold_denials", []), *reasons]
        await self.store.update_session(
            session.id, transport={**fresh.transport, "untold_denials": waiting}
        )

    async def _with_untold_denials(self, session_id: str, prompt: str) -> str:
        """Prefix ``prompt`` with denial reasons the model has not been told yet."""
        session = await self.store.get_session(session_id)
        waiting = session.transport.get("untold_denials")
        if not waiting:
            return prompt
        await self.store.update_session(
            session_id, transport={**session.transport, "untold_denials": []}
        )
        return f"{denial_notice(waiting)}\n\n{prompt}"

    async def _one_attempt(
        self, job: JobRecord, body_name: str, prompt: str, plan: str | None = None
    ) -> Event:
        """One turn of the job on its session's live body (warm, or started now)."""
        if (followed := self._follow.pop(job.id, None)) is not None:
            self._live[job.id] = followed.session
            return await follow(followed)
        if refused := await guard_job_worktree(self.store, job):  # every body start
            return refused
        record = await self.store.get_session(job.session_id or "")
        mode = job.options.get("permission_mode")
        gate = self._gate(job, record, mode)
        model = (job.options.get("model") or record.model) if body_name == record.body else None
        brief = Brief(task=job.prompt, plan=plan)  # a body started now: its context
        session = await self.hub.acquire(
            record.id, body_name, model=model, gate=gate, mode=mode, brief=brief
        )
        self._live[job.id] = session

        async def seen(event: Event) -> None:
            if isinstance(event, PermissionDecision) and event.decision == "deny":
                await self._tell_denial(job, session)

        turn = Turn(
            prompt,
            job_id=job.id,
            gate=gate,
            model=model,
            native_mode=native_mode(gate, mode),
            on_event=seen,
        )
        final = await session.run(turn)
        await self._keep_denials(job, record)
        if isinstance(final, SessionEnded):  # the body went away mid-turn: a crash to the job
            return TurnFailed(error=_error_of(final))
        return final

    async def _append(self, job: JobRecord, event: Event, *, origin: str = ORIGIN_CHORUS) -> Event:
        """Append an event Chorus itself made (notices, handoffs, the job's end)."""
        tagged = event.model_copy(update={"job_id": job.id})
        if self.audit is not None and isinstance(tagged, Handoff):
            self.audit.record_event(tagged)
        return await self.store.append(job.session_id or "", tagged, origin=origin)

    def _gate(self, job: JobRecord, session: SessionRecord, mode: str | None) -> PolicyGate | None:
        """The job's policy gate: its permission callback and event observer."""
        if self.policy is None:
            return None
        gate = self.hub.launcher.gate(session, mode)
        if gate is not None:
            gate.job_id = job.id  # its notices reach the job's stream
            self._gates[job.id] = gate
            self._second_opinion(job, gate)
            gate.on_answer = functools.partial(self._answered, job)
        return gate

    async def _answered(self, job: JobRecord, ask: PermissionAsk, answer: PermissionAnswer) -> None:
        """A refusal is steered into the turn before the body gets the answer, so the
        very next model request carries the policy's reason (a steer sent after the
        answer races the CLI's next request)."""
        session = self._live.get(job.id)
        if answer.decision == "deny" and session is not None:
            await self._tell_denial(job, session)

    def _second_opinion(self, job: JobRecord, gate: PolicyGate) -> None:
        """With ``[brain] second_opinion``, a second body votes on the job's risky calls
        (never for a vote's own job: voters do not vote on themselves)."""
        voter = BrainConfig.model_validate(self.config.brain).second_opinion
        if voter is None or job.options.get("system"):
            return

        async def vote(ask: PermissionAsk, verdict: Verdict) -> Vote | None:
            return await self.frameworks.vote(job, voter, ask, verdict)

        gate.second_opinion = vote

    async def _set_active_body(self, session: SessionRecord, body: str) -> None:
        fresh = await self.store.get_session(session.id)
        await self.store.update_session(
            session.id, transport={**fresh.transport, "active_body": body}
        )

    # -- outcomes -------------------------------------------------------------------------

    async def _finish(self, job: JobRecord, final: Event) -> None:
        if isinstance(final, TurnCompleted):
            await self._end(job, "succeeded", None, result=final.result)
            return
        error = _error_of(final)
        if job.id in self._interrupted:
            self._interrupted.discard(job.id)
            error = ErrorInfo(code=ErrorCode.INTERRUPTED, message="interrupted by the user")
            await self._end(job, "cancelled", error, result=None)
            return
        await self._end(job, "failed", error, result=None)

    async def _end(
        self, job: JobRecord, state: str, error: ErrorInfo | None, *, result: str | None
    ) -> None:
        """Move the job to ``state`` and append its JobEnded in one transaction."""
        fresh = await self.store.get_job(job.id)
        ended = JobEnded(state=state, error=error, result=result, attempts=fresh.attempts)
        fresh, stamped = await until_stored(
            lambda: self.store.end_job(
                job.id,
                JobState(state),
                ended,
                result={"text": result} if state == "succeeded" else None,
                error=error.model_dump() if error is not None else None,
            ),
            f"ending job {job.id}",
        )
        assert isinstance(stamped, JobEnded)
        self.frameworks.ended(fresh)
        for hook in self.outcome_hooks:
            try:
                await hook(fresh, stamped)
            except Exception:
                log.exception("outcome hook failed")


_MAX_WAITS = 5
#: Errors that move a job to the next body (unless failover is off): out of quota,
#: rate limited past its retries, or a login the provider refused.
_FAILS_OVER = (ErrorCode.RATE_LIMITED, ErrorCode.QUOTA_EXHAUSTED, ErrorCode.AUTH)


@dataclass(slots=True)
class _Run:
    """Where one job's attempts stand."""

    body: str
    original: str
    plan: str | None = None
    prompt: str = ""
    crashes: int = 0
    rate_retries: int = 0
    waits: int = 0
    tried: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.tried = [self.body]


def _active_body(session: SessionRecord) -> str:
    """The body a session runs on now (it moves on failover)."""
    active = session.transport.get("active_body")
    return active if isinstance(active, str) else session.body


def _error_of(final: Event) -> ErrorInfo:
    if isinstance(final, TurnFailed):
        return final.error
    if isinstance(final, SessionEnded) and final.error is not None:
        return final.error
    return ErrorInfo(code=ErrorCode.BODY_CRASHED, message="the body ended without a result")


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


def _continue_prompt(prompt: str) -> str:
    return (
        "(Chorus: your previous run of this task was cut off by a crash. Check what is "
        "already done, then continue.)\n\n" + prompt
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


async def notify_desktop(job: JobRecord, ended: JobEnded) -> None:
    """Outcome hook: tell the desktop a job ended."""
    await _notify(f"Chorus job {ended.state}", job.prompt[:120])


async def notify_failover(job: JobRecord, handoff: Handoff) -> None:
    """Failover hook: tell the desktop a job moved to another body."""
    title = f"Chorus failover: {handoff.from_body} → {handoff.to_body}"
    await _notify(title, f"{handoff.reason.code}: {job.prompt[:100]}")


def _checked_mode(mode: str | None) -> PermissionMode | None:
    try:
        return checked_mode(mode)
    except SessionError as exc:
        raise UserError(exc.message) from exc


def _own_hub(
    store: Store,
    config: ChorusConfig,
    factory: BodyFactory | None,
    policy: Policy | None,
    audit: AuditLog | None,
    secrets: SecretStore | None,
) -> SessionHub:
    """A hub for a supervisor used alone (tests of the queue; the daemon shares one)."""
    guards = policy_guards(policy, audit, secrets)
    launcher = BodyLauncher(config, store, guards=guards, factory=factory)
    return SessionHub(launcher, HubLimits(idle_timeout_s=config.daemon.session_idle_timeout_s))


def _sessions_of(jobs: list[JobRecord]) -> set[str]:
    """the sessions of the jobs this node left running (its orphans)."""
    return {job.session_id for job in jobs if job.session_id}
