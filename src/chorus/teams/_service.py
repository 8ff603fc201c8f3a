"""The daemon's side of teams: messages in and out of the store's mailboxes, member
turns as daemon jobs, and ``team run`` (plan, assign, work in parallel, synthesize).

Delivery never waits on a model: a member's job ending posts its final output as
a ``result`` message at once (the supervisor's outcome hook calls :meth:`ended`).
A message for a busy member goes into its running turn by a native steer where
the body can take one, else it waits for the turn's end, where a follow-up turn
carries it. Messages a turn carried are acked when the turn has ended; a turn
that was cancelled (or a daemon that died) releases them for the next turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import stat
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from chorus.store import (
    JobRecord,
    MessageRecord,
    NewMessage,
    SessionRecord,
    Store,
    UnknownRecordError,
    new_id,
)
from chorus.teams._config import (
    COORDINATOR,
    USER,
    TeamConfig,
    TeamError,
    inbox_view,
    list_teams,
    load_team,
    remove_team,
    save_team,
    team_dir,
)
from chorus.teams._lifecycle import StopPort, stop_member
from chorus.teams._protocol import (
    BadPlanError,
    member_prompt,
    parse_plan,
    plan_prompt,
    steer_text,
    synthesis_prompt,
)

log = logging.getLogger("chorus.teams")


class Jobs(Protocol):
    """What teams need from the daemon's supervisor (the daemon adapts it)."""

    store: Store

    def wake(self) -> None: ...

    def body_problem(self, body: str) -> str | None: ...

    def steers_natively(self, session_id: str) -> bool: ...

    async def steer(self, job_id: str, text: str) -> dict[str, Any]: ...

    async def interrupt(self, job_id: str) -> str: ...

    async def note(self, job_id: str, message: str) -> None: ...

    async def close_session(self, session_id: str) -> None: ...


@dataclass(slots=True)
class Run:
    """One ``team run``: its task, where it stands, and what came out."""

    id: str
    team: str
    task: str
    cwd: str
    state: str = "planning"
    assignments: dict[str, str] = field(default_factory=dict)
    jobs: dict[str, list[str]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    result: str | None = None
    error: str | None = None
    started_at: float = field(default_factory=time.time)
    ended_at: float | None = None

    @property
    def active(self) -> bool:
        return self.state not in ("done", "failed")


#: A run's states and the states each may move to.
RUN_TRANSITIONS: dict[str, tuple[str, ...]] = {
    "planning": ("working", "failed"),
    "working": ("synthesizing", "failed"),
    "synthesizing": ("done", "failed"),
    "done": (),
    "failed": (),
}


_ACTIVE: list[TeamService] = []


def active_service() -> TeamService | None:
    """The daemon's service (for the members' MCP tools, which run in the daemon)."""
    return _ACTIVE[-1] if _ACTIVE else None


class TeamService:
    def __init__(self, jobs: Jobs) -> None:
        self.jobs = jobs
        self.store = jobs.store
        self._running: dict[tuple[str, str], str] = {}
        self._last: dict[tuple[str, str], dict[str, Any]] = {}
        self._waiters: dict[str, asyncio.Future[JobRecord]] = {}
        self._runs: dict[str, Run] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._changed = asyncio.Event()

    async def recover(self) -> int:
        """At daemon start, for what a dead daemon left: a member turn that was
        requeued still carries its messages (and is tracked as running again); one
        that ended gets its end settled now (its result posted once, its messages
        acked); messages taken by a turn that never became a job are released.
        A run the dead daemon was driving is marked failed. Returns how many
        messages went back to pending."""
        released = 0
        for team in list_teams():
            released += await self._recover_team(team)
            _fail_saved_run(team)
        if released:
            log.info("teams: %d unacked messages released for redelivery", released)
        return released

    async def _recover_team(self, team: str) -> int:
        unacked = await self.store.list_messages(team, unacked=True)
        turns = sorted({m.delivered_to for m in unacked if m.delivered_to})
        released = 0
        for job_id in turns:
            try:
                job = await self.store.get_job(job_id)
            except UnknownRecordError:
                released += await self.store.release_messages(job_id=job_id)
                continue
            await self._recover_job(team, job)
        return released

    async def _recover_job(self, team: str, job: JobRecord) -> None:
        member = job.options.get("member")
        if not isinstance(member, str):
            return
        if str(job.state) in ("queued", "running"):
            self._running[(team, member)] = job.id
            return
        result = _job_text(job)
        error = str((job.error or {}).get("message", "")) if isinstance(job.error, dict) else ""
        await self.ended(job, str(job.state), result, error)

    # -- teams ---------------------------------------------------------------------------

    async def create(self, team: TeamConfig) -> dict[str, Any]:
        if (team_dir(team.name) / "config.toml").exists():
            raise TeamError(f"team {team.name!r} exists; tear it down first or pick a name")
        save_team(team)
        await self.store.set_team_members(team.name, team.mailbox_names)
        return self._describe(team)

    def _describe(self, team: TeamConfig) -> dict[str, Any]:
        return {
            **team.model_dump(),
            "folder": str(team_dir(team.name)),
        }

    async def list_all(self) -> list[dict[str, Any]]:
        return [await self.status(name) for name in list_teams()]

    async def status(self, name: str) -> dict[str, Any]:
        team = load_team(name)
        unacked = await self.store.list_messages(name, unacked=True)
        members = [self._member_status(team, m, unacked) for m in team.mailbox_names]
        live = self._runs.get(name)
        run = run_json(live) if live is not None else _saved_run(name)
        return {**self._describe(team), "members": members, "run": run}

    def _member_status(
        self, team: TeamConfig, name: str, unacked: list[MessageRecord]
    ) -> dict[str, Any]:
        job = self._running.get((team.name, name))
        last = self._last.get((team.name, name), {})
        state = "running" if job else str(last.get("state", "idle"))
        mine = [m for m in unacked if m.recipient == name]
        return {
            "name": name,
            "body": team.body_of(name),
            "role": team.members[name].role if name in team.members else "coordinator",
            "state": state,
            "job_id": job or last.get("job_id"),
            "pending": sum(1 for m in mine if m.delivered_at is None),
            "delivered": sum(1 for m in mine if m.delivered_at is not None),
        }

    async def teardown(self, name: str, *, force: bool = False) -> dict[str, Any]:
        team = load_team(name)
        busy = {m: j for (t, m), j in self._running.items() if t == name}
        if busy and not force:
            listed = ", ".join(f"{m} (job {j[:12]})" for m, j in busy.items())
            raise TeamError(
                f"team {name!r} has members running: {listed}; wait for them, "
                "or use --force to stop them"
            )
        stopped = {m: await self._stop(j) for m, j in busy.items()}
        run = self._runs.get(name)
        if run is not None and run.active:
            self._fail(run, "the team was torn down")
        await self._close_sessions(team)
        await self.store.set_team_members(name, [])
        remove_team(name)
        return {"team": name, "torn_down": True, "stopped": stopped}

    async def _stop(self, job_id: str) -> list[str]:
        return await stop_member(_Stopper(self), job_id)

    async def _close_sessions(self, team: TeamConfig) -> None:
        for session_id in _sessions(team.name).values():
            with contextlib.suppress(Exception):
                await self.jobs.close_session(session_id)

    # -- messages --------------------------------------------------------------------------

    async def send(
        self,
        name: str,
        to: str,
        text: str,
        *,
        kind: str = "status",
        sender: str = USER,
        message_id: str | None = None,
    ) -> dict[str, Any]:
        team = load_team(name)
        team.check_member(to)
        if sender not in (USER, *team.mailbox_names):
            raise TeamError(f"unknown sender {sender!r} in team {name!r}")
        if not text.strip():
            raise TeamError("the message is empty")
        msg = await self.post(team, sender, to, kind, {"text": text}, message_id=message_id)
        how = await self._deliver(team, to)
        return {"id": msg.id, "team": name, "to": to, "kind": kind, "how": how}

    async def post(
        self,
        team: TeamConfig,
        sender: str,
        to: str,
        kind: str,
        body: dict[str, Any],
        *,
        correlation: str | None = None,
        message_id: str | None = None,
    ) -> MessageRecord:
        """Store one message and add it to the recipient's readable JSONL view."""
        new = NewMessage(message_id or new_id(), team.name, sender, to, kind, body, correlation)
        msg = await self.store.post_message(new)
        await asyncio.to_thread(_append_view, team.name, msg)
        return msg

    async def _deliver(self, team: TeamConfig, member: str) -> str:
        """Get a member's pending messages to it now, if it can take them now."""
        if member == COORDINATOR:
            return "waiting: the coordinator reads its inbox when it synthesizes"
        job = self._running.get((team.name, member))
        if job is not None:
            return await self._steer_in(team, member, job)
        session = _sessions(team.name).get(member)
        if session is None:
            return "waiting: delivered with the member's next turn"
        started = await self._start_turn(team, member, None)
        return f"delivered: a new turn (job {started})" if started else "waiting"

    async def _steer_in(self, team: TeamConfig, member: str, job_id: str) -> str:
        session = _sessions(team.name).get(member, "")
        if not self.jobs.steers_natively(session):
            return f"waiting: delivered at the end of the member's turn (job {job_id[:12]})"
        for msg in await self.store.take_messages(team.name, member, job_id=job_id):
            try:
                await self.jobs.steer(job_id, steer_text(msg))
            except Exception:
                await self.store.release_messages(job_id=job_id)
                return "waiting: the steer failed; delivered at the turn's end"
        return f"steered into the running turn (job {job_id[:12]})"

    async def inbox(self, name: str, member: str, *, job_id: str | None) -> list[dict[str, Any]]:
        """A member reads its new messages (its tool): they are delivered to its turn
        (and acked when that turn ends)."""
        team = load_team(name)
        team.check_member(member)
        taken = await self.store.take_messages(name, member, job_id=job_id or new_id())
        if job_id is None:
            await self.store.ack_messages([m.id for m in taken])
        return [message_json(m) for m in taken]

    async def ack(self, name: str, ids: list[str]) -> list[str]:
        """Ack messages of the team taken by :meth:`inbox` (the ids acked now)."""
        load_team(name)
        return await self.store.ack_messages(ids)

    async def messages(self, name: str, member: str | None) -> list[dict[str, Any]]:
        load_team(name)
        return [message_json(m) for m in await self.store.list_messages(name, recipient=member)]

    def activate(self) -> None:
        """Make this the service the members' MCP tools use."""
        _ACTIVE[:] = [self]

    def current_job(self, team: str, member: str) -> str | None:
        return self._running.get((team, member))

    def member_of(self, session_id: str) -> tuple[str, str] | None:
        """The (team, member) a session belongs to, for the members' tools."""
        for team in list_teams():
            for member, sid in _sessions(team).items():
                if sid == session_id:
                    return team, member
        return None

    # -- turns -------------------------------------------------------------------------------

    async def _start_turn(self, team: TeamConfig, member: str, cwd: str | None) -> str | None:
        """Start a turn of ``member`` carrying its pending messages (None: nothing to carry)."""
        if (team.name, member) in self._running:
            return None
        job_id = new_id()
        taken = await self.store.take_messages(team.name, member, job_id=job_id)
        if not taken:
            return None
        problem = self.jobs.body_problem(team.body_of(member))
        if problem is not None:
            await self._unrunnable(team, member, taken, problem)
            return None
        try:
            session = await self._session(team, member, cwd)
            options = {"team": team.name, "member": member}
            prompt = member_prompt(team, member, taken)
            await self.store.create_job(
                prompt, body=session.body, session_id=session.id, options=options, job_id=job_id
            )
        except BaseException:
            await self.store.release_messages(job_id=job_id)
            raise
        self._running[(team.name, member)] = job_id
        self._track(team.name, member, job_id)
        self.jobs.wake()
        return job_id

    async def _unrunnable(
        self, team: TeamConfig, member: str, taken: list[MessageRecord], problem: str
    ) -> None:
        """A member whose body cannot start: its messages are answered with the reason."""
        log.warning("team %s: member %s cannot run: %s", team.name, member, problem)
        await self.store.ack_messages([m.id for m in taken])
        body = {"text": f"member {member} could not run: {problem}", "state": "failed"}
        await self.post(team, member, COORDINATOR, "result", body, correlation=self._run_id(team))
        self._last[(team.name, member)] = {"state": "failed", "error": problem}
        self._changed.set()

    def _track(self, team: str, member: str, job_id: str) -> None:
        run = self._runs.get(team)
        if run is not None and run.active:
            run.jobs.setdefault(member, []).append(job_id)

    def _run_id(self, team: TeamConfig) -> str | None:
        run = self._runs.get(team.name)
        return run.id if run is not None and run.active else None

    async def _session(self, team: TeamConfig, member: str, cwd: str | None) -> SessionRecord:
        """The member's session: kept across turns while the folder stays the same."""
        known = _sessions(team.name).get(member)
        if known is not None:
            with contextlib.suppress(UnknownRecordError):
                session = await self.store.get_session(known)
                if cwd is None or session.cwd == cwd:
                    return session
        body = team.body_of(member)
        session = await self.store.create_session(body, cwd=cwd)
        await asyncio.to_thread(_save_session, team.name, member, session.id)
        return session

    async def ended(self, job: JobRecord, state: str, result: str | None, error: str) -> None:
        """A job ended (the supervisor's outcome hook): settle what its turn carried,
        post a member's result at once, and start the turn its new messages need."""
        team_name, member = job.options.get("team"), job.options.get("member")
        if not isinstance(team_name, str) or not isinstance(member, str):
            return
        if self._running.get((team_name, member)) == job.id:
            del self._running[(team_name, member)]
        self._last[(team_name, member)] = {"state": state, "job_id": job.id}
        await self._post_result(team_name, member, job, state, result, error)
        if state == "cancelled":
            await self.store.release_messages(job_id=job.id)
        else:
            carried = await self._carried(team_name, member, job.id)
            await self.store.ack_messages([m.id for m in carried])
        await self._follow_up(team_name, member, state)
        waiter = self._waiters.pop(job.id, None)
        if waiter is not None and not waiter.done():
            waiter.set_result(job)
        self._changed.set()

    async def _carried(self, team: str, member: str, job_id: str) -> list[MessageRecord]:
        mine = await self.store.list_messages(team, recipient=member, unacked=True)
        return [m for m in mine if m.delivered_to == job_id]

    async def _post_result(
        self,
        team_name: str,
        member: str,
        job: JobRecord,
        state: str,
        result: str | None,
        error: str,
    ) -> None:
        """A member's job end as a ``result`` to the coordinator, posted before the
        turn's messages are acked and under an id made from the job's, so a crash in
        between posts it once (recovery settles the end again)."""
        if member == COORDINATOR:
            return
        try:
            team = load_team(team_name)
        except TeamError:
            return  # torn down meanwhile
        text = result if state == "succeeded" else f"({state}) {error}"
        body = {"text": text or "", "state": state, "job_id": job.id}
        await self.post(
            team,
            member,
            COORDINATOR,
            "result",
            body,
            correlation=self._run_id(team),
            message_id=f"result{job.id}",
        )

    async def _follow_up(self, team_name: str, member: str, state: str) -> None:
        """The turn boundary: messages that came meanwhile start the member's next turn."""
        if member == COORDINATOR or state == "cancelled":
            return
        with contextlib.suppress(TeamError):
            await self._start_turn(load_team(team_name), member, None)

    # -- team run ----------------------------------------------------------------------------

    async def run(
        self, name: str, task: str, cwd: str, assign: dict[str, str] | None
    ) -> dict[str, Any]:
        """Start a run (it goes on in the daemon); returns it as it starts."""
        team = load_team(name)
        if not task.strip() and not assign:
            raise TeamError("the task is empty")
        for member in assign or {}:
            team.check_member(member, coordinator=False)
        current = self._runs.get(name)
        if current is not None and current.active:
            raise TeamError(f"team {name!r} is already running a task (run {current.id})")
        run = Run(new_id(), name, task, cwd)
        self._runs[name] = run
        task_ = asyncio.create_task(self._drive(team, run, assign), name=f"team-run-{name}")
        self._tasks.add(task_)
        task_.add_done_callback(self._tasks.discard)
        return run_json(run)

    async def _drive(self, team: TeamConfig, run: Run, assign: dict[str, str] | None) -> None:
        try:
            run.assignments = assign or await self._plan(team, run)
            self._move(run, "working")
            await self._assign(team, run)
            await self._work(team, run)
            self._move(run, "synthesizing")
            run.result = await self._synthesize(team, run)
            self._move(run, "done")
        except Exception as exc:
            log.exception("team %s: run %s failed", team.name, run.id)
            self._fail(run, str(exc) or type(exc).__name__)
        finally:
            run.ended_at = time.time()
            await asyncio.to_thread(_save_run, run)
            if not team.persistent:
                await self._ephemeral_end(team)

    def _move(self, run: Run, state: str) -> None:
        if state not in RUN_TRANSITIONS[run.state]:
            raise TeamError(f"run {run.id}: cannot go from {run.state} to {state}")
        run.state = state
        _save_run(run)

    def _fail(self, run: Run, reason: str) -> None:
        if run.active:
            run.state, run.error = "failed", reason

    async def _ephemeral_end(self, team: TeamConfig) -> None:
        with contextlib.suppress(TeamError):
            await self.teardown(team.name, force=True)

    async def _plan(self, team: TeamConfig, run: Run) -> dict[str, str]:
        job = await self._coordinator_turn(team, run, plan_prompt(team, run.task), "plan")
        text = _job_text(job)
        if text is None:
            raise TeamError(f"the coordinator could not plan: job {job.id} {job.state}")
        try:
            plan, notes = parse_plan(team, text)
        except BadPlanError as exc:
            raise TeamError(str(exc)) from exc
        run.notes += notes
        return plan

    async def _assign(self, team: TeamConfig, run: Run) -> None:
        for member, text in run.assignments.items():
            body = {"text": text, "task": run.task}
            await self.post(team, COORDINATOR, member, "task", body, correlation=run.id)

    async def _work(self, team: TeamConfig, run: Run) -> None:
        """Run every member with messages (in parallel: each is a daemon job) until
        no member runs and none has anything left to do."""
        for member in run.assignments:
            await self._start_turn(team, member, run.cwd)
        while self._busy(team.name):
            self._changed.clear()
            if not self._busy(team.name):
                break
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), 5.0)
            if not run.active:
                raise TeamError(run.error or "the run was stopped")

    def _busy(self, team: str) -> bool:
        return any(t == team for t, _ in self._running)

    async def _synthesize(self, team: TeamConfig, run: Run) -> str:
        job_id = new_id()
        results = await self.store.take_messages(team.name, COORDINATOR, job_id=job_id)
        prompt = synthesis_prompt(run.task, results)
        job = await self._coordinator_turn(team, run, prompt, "synthesis", job_id=job_id)
        text = _job_text(job)
        if text is None:
            await self.store.release_messages(job_id=job_id)
            raise TeamError(f"the coordinator could not synthesize: job {job.id} {job.state}")
        return text

    async def _coordinator_turn(
        self, team: TeamConfig, run: Run, prompt: str, what: str, *, job_id: str | None = None
    ) -> JobRecord:
        problem = self.jobs.body_problem(team.coordinator)
        if problem is not None:
            raise TeamError(f"the coordinator's body cannot run: {problem}")
        session = await self._session(team, COORDINATOR, run.cwd)
        options = {"team": team.name, "member": COORDINATOR, "team_step": what}
        jid = job_id or new_id()
        done: asyncio.Future[JobRecord] = asyncio.get_running_loop().create_future()
        self._waiters[jid] = done
        await self.store.create_job(
            prompt, body=session.body, session_id=session.id, options=options, job_id=jid
        )
        self._running[(team.name, COORDINATOR)] = jid
        self._track(team.name, COORDINATOR, jid)
        self.jobs.wake()
        return await done


class _Stopper(StopPort):
    def __init__(self, service: TeamService) -> None:
        self._service = service

    async def request(self, job_id: str) -> None:
        await self._service.jobs.interrupt(job_id)

    async def note(self, job_id: str, message: str) -> None:
        await self._service.jobs.note(job_id, message)

    async def wait(self, job_id: str, seconds: float) -> bool:
        if not any(j == job_id for j in self._service._running.values()):
            return True
        done: asyncio.Future[JobRecord] = asyncio.get_running_loop().create_future()
        self._service._waiters.setdefault(job_id, done)
        waiter = self._service._waiters[job_id]
        try:
            await asyncio.wait_for(asyncio.shield(waiter), seconds)
            return True
        except TimeoutError:
            return False

    async def pgid(self, job_id: str) -> tuple[int, int | None] | None:
        job = await self._service.store.get_job(job_id)
        session = await self._service.store.get_session(job.session_id or "")
        pgid, started = session.transport.get("pgid"), session.transport.get("pgid_started")
        if not isinstance(pgid, int) or pgid <= 1:
            return None
        return pgid, started if isinstance(started, int) else None


def _job_text(job: JobRecord) -> str | None:
    if str(job.state) != "succeeded" or not isinstance(job.result, dict):
        return None
    text = job.result.get("text")
    return text if isinstance(text, str) else None


def message_json(msg: MessageRecord) -> dict[str, Any]:
    return {**asdict(msg), "state": msg.state}


def run_json(run: Run) -> dict[str, Any]:
    return asdict(run)


def _append_view(team: str, msg: MessageRecord) -> None:
    """One line on the inbox's view; a link planted in its place is not written through."""
    path = inbox_view(team, msg.recipient)
    path.parent.mkdir(parents=True, exist_ok=True)
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, 0o600)
    except OSError as exc:
        log.warning("team %s: inbox view %s not written: %s", team, path, exc)
        return
    with os.fdopen(fd, "a", encoding="utf-8") as view:
        if stat.S_ISREG(os.fstat(fd).st_mode):
            view.write(json.dumps(message_json(msg), ensure_ascii=False) + "\n")


def _sessions(team: str) -> dict[str, str]:
    try:
        data = json.loads((team_dir(team) / "sessions.json").read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def _save_session(team: str, member: str, session_id: str) -> None:
    _write_json(team_dir(team) / "sessions.json", {**_sessions(team), member: session_id})


def _save_run(run: Run) -> None:
    if team_dir(run.team).is_dir():
        _write_json(team_dir(run.team) / "last_run.json", run_json(run))


def _fail_saved_run(team: str) -> None:
    """A run a dead daemon was driving cannot go on: say so in its saved state."""
    run = _saved_run(team)
    if run is not None and run.get("state") not in ("done", "failed"):
        run.update(state="failed", error="the daemon stopped during the run; run it again")
        run["ended_at"] = time.time()
        _write_json(team_dir(team) / "last_run.json", run)


def _saved_run(team: str) -> dict[str, Any] | None:
    try:
        data = json.loads((team_dir(team) / "last_run.json").read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _write_json(path: Any, data: Any) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2))
    tmp.replace(path)
