"""One board for both kinds of question a person answers:

* *flags* (the ``flags`` table): the job went on with a default; the person may
  overrule it until the deadline;
* *approvals*: a permission ask in the policy's block set, waiting on the person
  (``chorus.policy.FlagBoard``: files under ``CHORUS_HOME/flags``).

:func:`board` lists them as :class:`BoardItem`; :func:`decide` approves or rejects
either kind by id (or unique prefix).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from chorus._errors import UserError
from chorus.policy import FlagBoard, FlagError, PendingFlag
from chorus.store import (
    FLAG_APPROVED,
    FLAG_PENDING,
    FLAG_REJECTED,
    AmbiguousIdError,
    FlagDecidedError,
    FlagRecord,
    JobRecord,
    JobState,
    Store,
    StoreError,
    UnknownFlagError,
)

Kind = Literal["flag", "approval"]
Verb = Literal["approve", "reject"]


@dataclass(frozen=True, slots=True)
class BoardItem:
    """A flag or an approval as a person sees it."""

    id: str
    kind: Kind
    question: str
    status: str
    default: str
    deadline_at: float
    job_id: str | None = None
    session_id: str | None = None
    options: list[str] = field(default_factory=list)
    choice: str | None = None
    reason: str | None = None
    decided_by: str | None = None
    created_at: float = 0.0
    #: The body that asked (approvals).
    body: str | None = None

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["answer"] = answer_hint(self)
        return data


def answer_hint(item: BoardItem) -> str:
    """The commands that answer ``item``."""
    job = item.job_id[:12] if item.job_id else "-"
    return f"chorus approve {job} {item.id} | chorus reject {job} {item.id} 'reason'"


def from_record(flag: FlagRecord) -> BoardItem:
    return BoardItem(
        id=flag.id,
        kind="flag",
        question=flag.question,
        status=flag.status,
        default=flag.default,
        deadline_at=flag.deadline_at,
        job_id=flag.job_id,
        session_id=flag.session_id,
        options=list(flag.options),
        choice=flag.choice,
        reason=flag.reason,
        decided_by=flag.decided_by,
        created_at=flag.created_at,
    )


def from_approval(flag: PendingFlag, job_id: str | None) -> BoardItem:
    return BoardItem(
        id=flag.id,
        kind="approval",
        question=flag.summary,
        status=FLAG_PENDING,
        default=flag.default,
        deadline_at=flag.expires,
        job_id=job_id,
        session_id=flag.session_id,
        options=["allow", "deny"],
        reason=flag.reason,
        created_at=flag.created,
        body=flag.body,
    )


_SHOWN = {
    JobState.QUEUED: "queued",
    JobState.RUNNING: "running",
    JobState.SUCCEEDED: "done",
    JobState.FAILED: "failed",
    JobState.CANCELLED: "cancelled",
}


def live_status(job: JobRecord, pending: list[BoardItem]) -> str:
    """queued / running / waiting (an approval blocks it) / flagged (it went on with a
    default a person may overrule) / done / failed / cancelled."""
    mine = [item for item in pending if item.job_id == job.id]
    if job.state == JobState.RUNNING and any(i.kind == "approval" for i in mine):
        return "waiting"
    if job.state == JobState.RUNNING and mine:
        return "flagged"
    return _SHOWN[job.state]


async def board(
    store: Store, *, approvals: FlagBoard | None = None, all_flags: bool = False
) -> list[BoardItem]:
    """Pending approvals and flags (``all_flags``: decided flags too), oldest first."""
    flags = await store.list_flags(status=None if all_flags else FLAG_PENDING)
    items = [from_record(f) for f in flags]
    for pending in (approvals or FlagBoard()).pending():
        items.append(from_approval(pending, await running_job_of(store, pending.session_id)))
    return sorted(items, key=lambda item: item.created_at)


async def running_job_of(store: Store, session_id: str | None) -> str | None:
    """The job of ``session_id`` that runs now (else its latest): a body lives across
    the jobs of its session, so its own idea of "the job" may be an older one."""
    if not session_id:
        return None
    jobs = [j for j in await store.list_jobs() if j.session_id == session_id]
    chosen = [j for j in jobs if j.state == JobState.RUNNING] or jobs
    return chosen[-1].id if chosen else None


async def find(store: Store, raw: str, *, approvals: FlagBoard | None = None) -> BoardItem:
    """The item whose id is or starts with ``raw``."""
    hits = [i for i in await board(store, approvals=approvals, all_flags=True) if i.id == raw]
    if hits:
        return hits[0]
    _refuse_answered(raw, approvals or FlagBoard())
    try:
        return from_record(await store.get_flag(raw))
    except UnknownFlagError:
        pass
    pending = [i for i in await board(store, approvals=approvals) if i.id.startswith(raw) and raw]
    if len(pending) == 1:
        return pending[0]
    if len(pending) > 1:
        raise AmbiguousIdError(f"flag prefix {raw!r} matches several: {[i.id for i in pending]}")
    raise UnknownFlagError(raw)


def _refuse_answered(raw: str, approvals: FlagBoard) -> None:
    """An approval ``raw`` that was answered already: :class:`FlagDecidedError`."""
    try:
        approvals.get(raw)
    except FlagError:
        return  # not an approval (or not one of this home)
    answer = approvals.answer_of(raw)
    if answer is not None:
        raise FlagDecidedError(
            f"approval {raw} was already answered ({answer.decision}, by {answer.source}); "
            "nothing changed"
        )


async def decide(
    store: Store,
    raw: str,
    verb: Verb,
    *,
    job: str | None = None,
    choice: str | None = None,
    reason: str | None = None,
    by: str = "person",
    approvals: FlagBoard | None = None,
) -> BoardItem:
    """Approve or reject the flag or approval ``raw`` (id or prefix). ``job`` (id or
    prefix), when given, must be the item's job. Raises :class:`FlagDecidedError`
    (nothing changed) when it was decided already."""
    item = await find(store, raw, approvals=approvals)
    _check_job(item, job)
    if item.kind == "approval":
        return _answer_approval(item, verb, reason, approvals or FlagBoard())
    status = FLAG_APPROVED if verb == "approve" else FLAG_REJECTED
    decided = await store.decide_flag(item.id, status, choice=choice, reason=reason, decided_by=by)
    return from_record(decided)


def _check_job(item: BoardItem, job: str | None) -> None:
    if job and job != "-" and not (item.job_id or "").startswith(job):
        raise UserError(
            f"flag {item.id} belongs to job {item.job_id or '(none)'}, not {job!r}; "
            "`chorus flags` shows each flag's job"
        )


def _answer_approval(item: BoardItem, verb: Verb, reason: str | None, fb: FlagBoard) -> BoardItem:
    decision: Literal["allow", "deny"] = "allow" if verb == "approve" else "deny"
    try:
        answer = fb.answer(item.id, decision, note=reason)
    except FlagError as exc:
        raise FlagDecidedError(f"{exc}; nothing changed") from exc
    status = FLAG_APPROVED if decision == "allow" else FLAG_REJECTED
    return BoardItem(
        **{**asdict(item), "status": status, "choice": decision, "decided_by": answer.source}
    )


def describe(item: BoardItem, now: float | None = None) -> str:
    """One line for a terminal."""
    now = time.time() if now is None else now
    left = max(0.0, item.deadline_at - now)
    when = (
        f"default {item.default!r} in {left:.0f}s" if item.status == FLAG_PENDING else item.status
    )
    return f"{item.id} [{item.kind}] {item.question} ({when})"


async def answer_for_session(
    store: Store,
    session_id: str,
    verb: Verb,
    flag_id: str | None,
    reason: str | None,
    *,
    approvals: FlagBoard | None = None,
) -> BoardItem:
    """Decide ``flag_id``, or without one the session's newest pending item."""
    if flag_id is None:
        mine = [i for i in await board(store, approvals=approvals) if i.session_id == session_id]
        if not mine:
            raise UserError("nothing waits in this session; `chorus flags` lists every one")
        flag_id = mine[-1].id
    return await decide(store, flag_id, verb, reason=reason, by="repl", approvals=approvals)


def repl_answerer(session_id: str) -> Callable[[str, str | None, str | None], Awaitable[str]]:
    """The REPL's ``:allow``/``:deny``: decide in the store of this ``CHORUS_HOME``."""

    async def answer(verb: str, flag_id: str | None, reason: str | None) -> str:
        from chorus.config import load_config
        from chorus.store import open_store

        chosen: Verb = "approve" if verb == "approve" else "reject"
        try:
            async with open_store(load_config()) as store:
                item = await answer_for_session(store, session_id, chosen, flag_id, reason)
        except (UserError, StoreError) as exc:
            return f"error: {exc}"
        return f"{item.id}: {item.status} {item.choice or ''}".rstrip()

    return answer
