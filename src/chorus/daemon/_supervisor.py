"""The supervisor: job queue → body → session, with crash recovery.

Scheduling rules:

* at most ``max_parallel_jobs`` jobs run at once;
* jobs of one session run one at a time, in submission order (a second job for a
  busy session waits behind the first);
* a paused session (``chorus talk`` has it) runs nothing until resumed.

A job runs one user turn on its session's body. If the body process dies
mid-turn, the job restarts the body with its native resume (bounded by
``max_body_restarts``) and continues; after that the job fails with the reason.
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
import signal
import subprocess
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chorus._errors import UnknownBodyError, UserError
from chorus.bodies import (
    CLI_OF,
    Body,
    BodyOptions,
    PermissionCallback,
    allow_all,
    body_names,
    create_body,
)
from chorus.config import ChorusConfig
from chorus.events import (
    ErrorCode,
    ErrorInfo,
    Event,
    JobEnded,
    Notice,
    SessionEnded,
    TurnCompleted,
    TurnFailed,
)
from chorus.store import JobRecord, JobState, SessionRecord, Store

log = logging.getLogger("chorus.daemon")

BodyFactory = Callable[[str, BodyOptions], Body]
#: Hook run on every job outcome: (job, final event) → None (notifications, health).
OutcomeHook = Callable[[JobRecord, JobEnded], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class JobRequest:
    """What a client asks for. ``body=None`` lets the router choose."""

    prompt: str
    body: str | None = None
    model: str | None = None
    cwd: str | None = None
    session_id: str | None = None
    permission_mode: str = "default"


class Supervisor:
    """Owns the queue and every running body. Create, then ``await run()`` inside a
    task group; stop by cancelling that task (running bodies are closed)."""

    def __init__(
        self,
        store: Store,
        config: ChorusConfig,
        *,
        body_factory: BodyFactory | None = None,
        permission_callback: PermissionCallback = allow_all,
        choose_body: Callable[[str], str] | None = None,
    ) -> None:
        self.store = store
        self.config = config
        self._factory = body_factory or (lambda name, opts: create_body(name, opts, config))
        self._permission = permission_callback
        self._choose = choose_body or (lambda prompt: "claude")
        self._wake = asyncio.Event()
        self._busy: set[str] = set()
        self._paused: set[str] = set()
        self._live: dict[str, Body] = {}
        self._interrupted: set[str] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self.outcome_hooks: list[OutcomeHook] = []
        self.started_at = time.time()

    # -- submitting and controlling -------------------------------------------------

    async def submit(self, req: JobRequest) -> JobRecord:
        """Validate and queue a job. Bad input raises :class:`UserError` and writes nothing."""
        if not req.prompt.strip():
            raise UserError("the prompt is empty")
        session = await self._session_for(req)
        job = await self.store.create_job(
            req.prompt,
            body=session.body,
            session_id=session.id,
            options={"model": req.model, "permission_mode": req.permission_mode},
        )
        self._wake.set()
        return job

    async def _session_for(self, req: JobRequest) -> SessionRecord:
        if req.session_id:
            session = await self.store.get_session(req.session_id)
            if req.body and req.body != session.body:
                raise UserError(f"session {session.id} belongs to body {session.body!r}")
            return session
        body = req.body or self._choose(req.prompt)
        if body not in body_names(self.config):
            known = ", ".join(body_names(self.config))
            raise UnknownBodyError(f"unknown body {body!r}; known bodies: {known}")
        cwd = _checked_dir(req.cwd)
        self._check_cli(body)
        return await self.store.create_session(body, model=req.model, cwd=str(cwd))

    def _check_cli(self, body: str) -> None:
        from chorus.agents import find_agent

        find_agent(self._cli_name(body))

    def _cli_name(self, body: str) -> str:
        if body in CLI_OF:
            return CLI_OF[body]
        return body

    async def interrupt(self, job_id: str) -> str:
        """Interrupt a running job or cancel a queued one; returns what was done."""
        job = await self.store.get_job(job_id)
        if job.state == JobState.QUEUED:
            await self.store.update_job(job_id, state=JobState.CANCELLED)
            await self._end(job, "cancelled", None, result=None)
            return "cancelled"
        body = self._live.get(job_id)
        if job.state != JobState.RUNNING or body is None:
            return f"not running ({job.state})"
        self._interrupted.add(job_id)
        await body.interrupt()
        return "interrupted"

    def pause(self, session_id: str) -> None:
        self._paused.add(session_id)

    def resume(self, session_id: str) -> None:
        self._paused.discard(session_id)
        self._wake.set()

    def is_busy(self, session_id: str) -> bool:
        return session_id in self._busy

    def status(self) -> dict[str, Any]:
        return {
            "pid": os.getpid(),
            "started_at": self.started_at,
            "running_jobs": sorted(self._live),
            "busy_sessions": sorted(self._busy),
            "paused_sessions": sorted(self._paused),
            "max_parallel_jobs": self.config.daemon.max_parallel_jobs,
        }

    # -- the scheduling loop ------------------------------------------------------------

    async def run(self) -> None:
        """Requeue jobs a dead daemon left running, then schedule forever."""
        for job in await self.store.requeue_running_jobs():
            log.info("requeued job %s after restart", job.id)
            await self._kill_orphan(job)
        try:
            while True:
                await self._schedule()
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), 1.0)
        finally:
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _schedule(self) -> None:
        limit = self.config.daemon.max_parallel_jobs
        for job in await self.store.list_jobs(state=JobState.QUEUED):
            if len(self._busy) >= limit:
                return
            sid = job.session_id or ""
            if sid in self._busy or sid in self._paused:
                continue
            self._busy.add(sid)
            job = await self.store.update_job(job.id, state=JobState.RUNNING)
            task = asyncio.create_task(self._run_job(job), name=f"job-{job.id}")
            self._tasks.add(task)
            task.add_done_callback(self._job_done)

    def _job_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("job task crashed", exc_info=task.exception())
        self._wake.set()

    async def _kill_orphan(self, job: JobRecord) -> None:
        """A body left by a killed daemon still runs in its own process group: end it
        so the resumed one does not race it on the same native session."""
        if not job.session_id:
            return
        session = await self.store.get_session(job.session_id)
        pgid = session.transport.get("pgid")
        if isinstance(pgid, int) and pgid > 1:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)

    # -- running one job ----------------------------------------------------------------

    async def _run_job(self, job: JobRecord) -> None:
        sid = job.session_id or ""
        try:
            final = await self._attempts(job)
        except Exception as exc:  # the job must end with a reason, whatever broke
            log.exception("job %s failed inside Chorus", job.id)
            err = ErrorInfo(code=ErrorCode.UNKNOWN, message=f"chorus error: {exc}")
            final = TurnFailed(error=err)
        finally:
            self._busy.discard(sid)
            self._live.pop(job.id, None)
        await self._finish(job, final)

    async def _attempts(self, job: JobRecord) -> Event:
        restarts = self.config.daemon.max_body_restarts
        prompt = job.prompt
        if job.attempts > 1:
            prompt = _continue_prompt(job.prompt)
        final: Event | None = None
        for attempt in range(restarts + 1):
            final = await self._one_attempt(job, prompt)
            crashed = isinstance(final, TurnFailed) and final.error.code == ErrorCode.BODY_CRASHED
            if not crashed or job.id in self._interrupted or attempt == restarts:
                break
            msg = f"body crashed; resuming natively (restart {attempt + 1} of {restarts})"
            await self._append(job, Notice(message=msg, kind="recovery"))
            prompt = _continue_prompt(job.prompt)
        assert final is not None
        return final

    async def _one_attempt(self, job: JobRecord, prompt: str) -> Event:
        session = await self.store.get_session(job.session_id or "")
        body = self._factory(session.body, self._options(job, session))
        self._live[job.id] = body
        final: Event | None = None
        try:
            await body.start()
            await self._note_pid(session, body)
            async for event in body.turn(prompt):
                await self._append(job, event)
                await self._sync_native_id(session, body)
                final = event
        finally:
            with contextlib.suppress(Exception):
                await body.close()
        await self._sync_native_id(session, body)
        return final or SessionEnded(reason="body produced no terminal event")

    def _options(self, job: JobRecord, session: SessionRecord) -> BodyOptions:
        agent = self.config.agents.get(self._cli_name(session.body))
        env = dict(os.environ)
        if agent is not None:
            env.update(agent.env)
        return BodyOptions(
            cwd=Path(session.cwd or os.getcwd()),
            model=job.options.get("model") or session.model,
            permission_mode=job.options.get("permission_mode") or "default",
            resume=session.native_session_id,
            env=env,
            permission_callback=self._permission,
            raw_tap=self.store.raw_tap(session.id),
        )

    async def _append(self, job: JobRecord, event: Event) -> Event:
        tagged = event.model_copy(update={"job_id": job.id})
        return await self.store.append(job.session_id or "", tagged)

    async def _sync_native_id(self, session: SessionRecord, body: Body) -> None:
        native = body.native_session_id
        if native and native != session.native_session_id:
            await self.store.update_session(session.id, native_session_id=native)
            object.__setattr__(session, "native_session_id", native)

    async def _note_pid(self, session: SessionRecord, body: Body) -> None:
        pid = getattr(body, "pid", None)
        if isinstance(pid, int):
            transport = {**session.transport, "pgid": pid}
            await self.store.update_session(session.id, transport=transport, state="active")

    # -- outcomes -------------------------------------------------------------------------

    async def _finish(self, job: JobRecord, final: Event) -> None:
        if isinstance(final, TurnCompleted):
            await self.store.update_job(
                job.id, state=JobState.SUCCEEDED, result={"text": final.result}
            )
            await self._end(job, "succeeded", None, result=final.result)
            return
        error = _error_of(final)
        if job.id in self._interrupted:
            self._interrupted.discard(job.id)
            error = ErrorInfo(code=ErrorCode.INTERRUPTED, message="interrupted by the user")
            await self.store.update_job(job.id, state=JobState.CANCELLED, error=error.model_dump())
            await self._end(job, "cancelled", error, result=None)
            return
        await self.store.update_job(job.id, state=JobState.FAILED, error=error.model_dump())
        await self._end(job, "failed", error, result=None)

    async def _end(
        self, job: JobRecord, state: str, error: ErrorInfo | None, *, result: str | None
    ) -> None:
        fresh = await self.store.get_job(job.id)
        ended = JobEnded(state=state, error=error, result=result, attempts=fresh.attempts)
        stamped = await self._append(job, ended)
        assert isinstance(stamped, JobEnded)
        for hook in self.outcome_hooks:
            try:
                await hook(fresh, stamped)
            except Exception:
                log.exception("outcome hook failed")


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
    return cwd


def _continue_prompt(prompt: str) -> str:
    return (
        "(Chorus: your previous run of this task was cut off by a crash. Check what is "
        "already done, then continue.)\n\n" + prompt
    )


async def notify_desktop(job: JobRecord, ended: JobEnded) -> None:
    """Desktop notification where the platform has one (notify-send, osascript)."""
    title = f"Chorus job {ended.state}"
    body = job.prompt[:120]
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
