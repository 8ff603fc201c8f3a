"""One running job: everything the supervisor knows of it while it runs, and its turns.

A :class:`JobRun` is made when this node claims a job and dropped when the job
ends. It holds the job's task, the live session its turn runs on, the policy gate
of its current turn (built once per turn and handed down to the session hub and
the turn), whether the user interrupted it, the denial reasons no turn has carried
yet, the turn of a re-attached body it follows, and the bodies it ran on.

:meth:`JobRun.direct` runs one turn of the job until it ends for good: crashed
bodies are resumed natively, rate limits retried, quota and login errors fail the
job over to the next healthy body (with a handoff bundle), and with no healthy
body it waits for the earliest reset. The body that finishes is the one credited:
the job's record names it, and :attr:`JobRun.failed_over_from` the ones it left.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from chorus._errors import BodyCrashedError
from chorus.config import BrainConfig
from chorus.context import Brief
from chorus.daemon._budget import budget_error, refusal
from chorus.daemon._durability import Followed, error_info, follow
from chorus.daemon._outcomes import JobFailedOver
from chorus.events import (
    ErrorCode,
    ErrorInfo,
    Event,
    Handoff,
    Notice,
    PermissionDecision,
    SessionEnded,
    TurnCompleted,
    TurnFailed,
)
from chorus.permissions import PermissionAnswer, PermissionAsk
from chorus.policy import denial_notice
from chorus.router import build_bundle
from chorus.session import Session, Turn, native_mode
from chorus.store import JobRecord, SessionRecord
from chorus.worktrees import guard_job_worktree, job_worktree

if TYPE_CHECKING:
    from chorus.daemon._supervisor import Supervisor
    from chorus.policy import PolicyGate, Verdict, Vote

log = logging.getLogger("chorus.daemon")

_MAX_WAITS = 5
#: Errors that move a job to the next body (unless failover is off): out of quota,
#: rate limited past its retries, or a login the provider refused.
_FAILS_OVER = (ErrorCode.RATE_LIMITED, ErrorCode.QUOTA_EXHAUSTED, ErrorCode.AUTH)


@dataclass(slots=True)
class Attempts:
    """Where one :meth:`JobRun.direct` call's attempts stand."""

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


class JobRun:
    """One job running on this node (see the module's docstring)."""

    def __init__(self, sup: Supervisor, job: JobRecord, followed: Followed | None = None) -> None:
        self.sup = sup
        self.job = job
        self.task: asyncio.Task[None] | None = None
        #: The live session its current turn runs on.
        self.session: Session | None = None
        #: The policy gate of its current turn.
        self.gate: PolicyGate | None = followed.gate if followed is not None else None
        #: The turn a re-attached body runs for it (a previous daemon's).
        self.followed = followed
        self.interrupted = False
        #: Denial reasons no turn could carry yet (kept in the session at the end).
        self.untold: list[str] = []
        #: The body it runs on now (None before its first turn), and those it left.
        self.body: str | None = None
        self.failed_over_from: list[str] = []

    # -- control ----------------------------------------------------------------------

    async def interrupt(self) -> bool:
        """Interrupt the running turn; one asked for while the body still starts ends
        the job as soon as the body is there, before its turn begins."""
        self.interrupted = True
        if self.session is not None:
            await self.session.interrupt()
        return True

    # -- running --------------------------------------------------------------------------

    async def attempts(self) -> Event:
        """Run the job: on one body, or under its thinking framework."""
        job = self.job
        framework = job.options.get("framework")
        if isinstance(framework, str) and framework != "direct":
            return await self.sup.frameworks.run(job, framework)
        first = job.prompt if job.attempts <= 1 else continue_prompt(job.prompt)
        return await self.direct(first)

    async def direct(self, prompt: str, plan: str | None = None) -> Event:
        """Run one turn of the job until it ends for good: restart crashed bodies, retry
        rate limits, fail over on quota, wait for a cooldown when nothing is healthy.
        ``plan``: the job's plan (a framework's), for the context of a body it starts."""
        session = await self.sup.store.get_session(self.job.session_id or "")
        body = active_body(session)
        run = Attempts(body=body, original=body, plan=plan)
        run.prompt = await self._with_untold_denials(session, prompt)
        while True:
            if (over := await self._over_budget(run.body)) is not None:
                return over
            self.body = run.body
            final = await self._one_attempt(run.body, run.prompt, run.plan)
            if (refused := await self._meter_refused()) is not None:  # per request
                return refused
            if not isinstance(final, TurnFailed) or self.interrupted:
                if isinstance(final, TurnCompleted):
                    await self.sup.credit_success(run.body)
                return final
            if not await self._recover(run, final.error):
                return final

    async def _one_attempt(self, body: str, prompt: str, plan: str | None) -> Event:
        """One turn of the job on its session's live body (warm, or started now)."""
        job = self.job
        if (followed := self.followed) is not None:
            self.followed, self.session = None, followed.session
            return await follow(followed)
        if refused := await guard_job_worktree(self.sup.store, job):  # every body start
            return refused
        record = await self.sup.store.get_session(job.session_id or "")
        mode = job.options.get("permission_mode")
        self.gate = gate = self.sup.job_gate(job, record, mode)  # this turn's one gate
        model = (job.options.get("model") or record.model) if body == record.body else None
        brief = Brief(task=job.prompt, plan=plan)  # a body started now: its context
        wanted = native_mode(gate, mode)
        turn = Turn(prompt, job.id, gate, model, native_mode=wanted, on_event=self._seen)
        try:
            self.session = session = await self.sup.hub.acquire(
                record.id, body, model=model, gate=gate, mode=mode, brief=brief
            )
            turn.interrupted = self.interrupted  # asked while the body started
            final = await session.run(turn)
        except BodyCrashedError as exc:  # a body that died between its turns: restart it
            return TurnFailed(error=error_info(exc))
        await self._keep_denials(record)
        if isinstance(final, SessionEnded):  # the body went away mid-turn: a crash to the job
            return TurnFailed(error=error_of(final))
        return final

    # -- denials ----------------------------------------------------------------------------

    async def _seen(self, event: Event) -> None:
        if isinstance(event, PermissionDecision) and event.decision == "deny":
            await self.tell_denial()

    async def answered(self, ask: PermissionAsk, answer: PermissionAnswer) -> None:
        """A refusal is steered into the turn before the body gets the answer, so the
        very next model request carries the policy's reason (a steer sent after the
        answer races the CLI's next request)."""
        if answer.decision == "deny" and self.session is not None:
            await self.tell_denial()

    async def tell_denial(self) -> None:
        """Make sure the model learns why a tool was denied. Claude carries the reason in
        the tool result itself; Codex's decline carries none, so the reason is steered
        into the running turn; bodies that cannot steer get it with the next prompt."""
        session, gate = self.session, self.gate
        if gate is None or session is None:
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
        self.untold.extend(reasons)

    async def _keep_denials(self, session: SessionRecord) -> None:
        """Reasons no turn could carry wait in the session for its next prompt."""
        reasons, self.untold = self.untold, []
        if not reasons:
            return
        store = self.sup.store
        fresh = await store.get_session(session.id)
        waiting = [*fresh.transport.get("untold_denials", []), *reasons]
        await store.update_session(
            session.id, transport={**fresh.transport, "untold_denials": waiting}
        )

    async def _with_untold_denials(self, session: SessionRecord, prompt: str) -> str:
        """Prefix ``prompt`` with denial reasons the model has not been told yet
        (``session`` as just read)."""
        waiting = session.transport.get("untold_denials")
        if not waiting:
            return prompt
        await self.sup.store.update_session(
            session.id, transport={**session.transport, "untold_denials": []}
        )
        return f"{denial_notice(waiting)}\n\n{prompt}"

    # -- budget -------------------------------------------------------------------------------

    async def _over_budget(self, body: str) -> TurnFailed | None:
        """A ``[budget]`` limit reached: the job stops before spending more."""
        why = refusal(self.sup.ledger, self.sup.config.budget, self.job.id, body)
        return None if why is None else await self._budget_stop(why)

    async def _meter_refused(self) -> TurnFailed | None:
        """The meter refused one of the job's model requests (a ``[budget]`` limit
        reached mid-turn): the job ends with that, whatever its CLI made of the 400."""
        why = self.sup.ledger.refused.pop(self.job.id, None)
        return None if why is None else await self._budget_stop(why)

    async def _budget_stop(self, why: str) -> TurnFailed:
        await self.sup.note(self.job, Notice(message=f"stopped: {why}", kind="budget"))
        await self.sup.tell_desktop("Chorus budget reached", f"{why}: {self.job.prompt[:80]}")
        return TurnFailed(error=budget_error(why))

    # -- recovery -------------------------------------------------------------------------------

    async def _recover(self, run: Attempts, error: ErrorInfo) -> bool:
        """Decide what to do after a failed turn; False means the job fails with it."""
        if error.code == ErrorCode.BODY_CRASHED:
            return await self._restart(run)
        if error.code not in _FAILS_OVER:
            return False
        router = self.sup.config.router
        if error.code == ErrorCode.RATE_LIMITED and run.rate_retries < router.rate_limit_retries:
            return await self._retry(run, error)
        await self.sup.credit_failure(run.body, error)
        off = self.job.options.get("failover") is False
        if not router.failover or off or run.waits >= _MAX_WAITS:
            return False
        return await self._failover(run, error)

    async def _restart(self, run: Attempts) -> bool:
        limit = self.sup.config.daemon.max_body_restarts
        if run.crashes >= limit:
            return False
        run.crashes += 1
        msg = f"body crashed; resuming natively (restart {run.crashes} of {limit})"
        await self.sup.note(self.job, Notice(message=msg, kind="recovery"))
        run.prompt = continue_prompt(self.job.prompt)
        return True

    async def _retry(self, run: Attempts, error: ErrorInfo) -> bool:
        router = self.sup.config.router
        run.rate_retries += 1
        delay = error.retry_after_s or router.rate_limit_delay_s
        msg = f"{run.body} is rate limited; retrying in {delay:.1f}s before any failover"
        await self.sup.note(self.job, Notice(message=msg, kind="retry"))
        await asyncio.sleep(delay)
        run.prompt = continue_prompt(self.job.prompt)
        return True

    async def _failover(self, run: Attempts, error: ErrorInfo) -> bool:
        """Hand the job to the next healthy body, or wait for the earliest reset."""
        sup, job = self.sup, self.job
        nxt = sup.router.choose(
            job.prompt,
            sup.health,
            time.time(),
            exclude=run.tried,
            key=sup.provider_key,
            unready=sup.unready,
        )
        if nxt is None:
            return await self._wait_for_reset(run)
        session = await sup.store.get_session(job.session_id or "")
        events = [e for e in await sup.store.read_events(session.id) if e.job_id == job.id]
        bundle = build_bundle(
            task=job.prompt,
            from_body=run.body,
            failure=error,
            events=events,
            cwd=Path(session.cwd or "."),
            token_budget=sup.config.router.handoff_tokens,
            worktree=await job_worktree(sup.store, job),
        )
        prompt = bundle.render()
        handoff = Handoff(from_body=run.body, to_body=nxt, reason=error, bundle_chars=len(prompt))
        await sup.note(job, handoff)
        await self.move_to(session, run.body, nxt)
        await sup.outcomes.publish(JobFailedOver(job, handoff))
        run.body, run.prompt = nxt, prompt
        run.plan = "\n".join(bundle.plan) or run.plan  # the next body's context has it
        run.tried.append(nxt)
        return True

    async def _wait_for_reset(self, run: Attempts) -> bool:
        """No body is healthy: wait until the earliest reset, then resume natively
        on the original body."""
        sup, job = self.sup, self.job
        candidates = list(sup.router.bodies) or [run.original]
        wake = sup.health.earliest_reset([sup.provider_key(b) for b in candidates])
        delay = max(0.0, min(wake - time.time(), sup.config.router.max_wait_s))
        msg = f"no healthy body; waiting {delay:.1f}s for the earliest reset"
        await sup.note(job, Notice(message=msg, kind="waiting"))
        await asyncio.sleep(delay)
        session = await sup.store.get_session(job.session_id or "")
        await self.move_to(session, run.body, run.original)
        run.waits += 1
        run.body = run.original
        run.tried = [run.original]
        run.prompt = continue_prompt(job.prompt)
        return True

    async def move_to(self, session: SessionRecord, left: str, to: str) -> None:
        """The session runs on ``to`` from now on, and the job's record names it."""
        if left != to:
            self.failed_over_from.append(left)
        store = self.sup.store
        fresh = await store.get_session(session.id)
        await store.update_session(session.id, transport={**fresh.transport, "active_body": to})
        self.job = await store.update_job(self.job.id, body=to)


# -- helpers --------------------------------------------------------------------------------


def wire_gate(sup: Supervisor, job: JobRecord, gate: PolicyGate) -> None:
    """Make ``gate`` the job's: its notices reach the job's stream, a refusal is told
    through the job's run, and with ``[brain] second_opinion`` a second body votes on
    its risky calls (never for a vote's own job: voters do not vote on themselves)."""
    gate.job_id = job.id
    gate.on_answer = functools.partial(sup.answered, job.id)
    voter = BrainConfig.model_validate(sup.config.brain).second_opinion
    if voter is None or job.options.get("system"):
        return

    async def vote(ask: PermissionAsk, verdict: Verdict) -> Vote | None:
        return await sup.frameworks.vote(job, voter, ask, verdict)

    gate.second_opinion = vote


def active_body(session: SessionRecord) -> str:
    """The body a session runs on now (it moves on failover)."""
    active = session.transport.get("active_body")
    return active if isinstance(active, str) else session.body


def error_of(final: Event) -> ErrorInfo:
    if isinstance(final, TurnFailed):
        return final.error
    if isinstance(final, SessionEnded) and final.error is not None:
        return final.error
    return ErrorInfo(code=ErrorCode.BODY_CRASHED, message="the body ended without a result")


def continue_prompt(prompt: str) -> str:
    return (
        "(Chorus: your previous run of this task was cut off by a crash. Check what is "
        "already done, then continue.)\n\n" + prompt
    )
