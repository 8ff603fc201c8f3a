"""Flags in a running daemon: raise one (the MCP ``flag`` tool), settle deadlines,
and tell each job what was decided.

:class:`FlagDesk` knows the daemon only through three callables, so this package
sits below it: ``steer(job_id, text)`` (the supervisor's: the running turn, or a
follow-up job once the job ended), ``note(job_id, event)`` (append to the job's
log) and ``notify(title, text)`` (a desktop notification).

The deadline lives in the store, not in a timer: a daemon killed with ``-9``
settles every flag whose deadline passed meanwhile at its first tick.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from chorus._errors import ChorusError, UserError
from chorus.config import FlagsConfig
from chorus.events import Event, Flag
from chorus.flags._board import answer_hint, from_record, running_job_of
from chorus.store import FLAG_REJECTED, FlagRecord, Store, StoreError

log = logging.getLogger("chorus.flags")

Steer = Callable[[str, str], Awaitable[dict[str, Any]]]
Note = Callable[[str, Event], Awaitable[object]]
Notify = Callable[[str, str], Awaitable[None]]

MAX_QUESTION = 2000


def check_flag_input(question: str, options: Sequence[str], default: str) -> list[str]:
    """The options, checked: a question, a default among the options (when given)."""
    if not question.strip():
        raise UserError("the flag's question is empty")
    if len(question) > MAX_QUESTION:
        raise UserError(f"the flag's question is longer than {MAX_QUESTION} characters")
    if not default.strip():
        raise UserError("the flag needs a default: what you go on with now")
    chosen = [str(o) for o in options if str(o).strip()]
    if chosen and default not in chosen:
        raise UserError(f"the default {default!r} is not one of the options {chosen}")
    return chosen


def flag_event(flag: FlagRecord, name: str | None = None) -> Flag:
    """The ``Flag`` event for ``flag`` in its current state."""
    return Flag(
        name=name or ("raised" if flag.status == "pending" else flag.status),
        text=flag.question,
        flag_id=flag.id,
        options=list(flag.options),
        default=flag.default,
        choice=flag.choice,
        deadline_at=flag.deadline_at,
        answer_hint=answer_hint(from_record(flag)),
        job_id=flag.job_id,
    )


def steer_text(flag: FlagRecord) -> str:
    """What the job is told when the person overruled its default."""
    head = f"About your flag {flag.id} ({flag.question!r}): you went on with {flag.default!r}"
    if flag.status == FLAG_REJECTED:
        why = f" ({flag.reason})" if flag.reason else ""
        instead = f"; they want {flag.choice!r} instead" if flag.choice else ""
        return f"{head}; the person rejected that{why}{instead}. Adjust your work accordingly."
    return f"{head}; the person chose {flag.choice!r}. Adjust your work to {flag.choice!r}."


class FlagDesk:
    """Raise flags and keep them: deadlines, decisions told to their jobs."""

    def __init__(
        self,
        store: Store,
        config: FlagsConfig,
        *,
        steer: Steer,
        note: Note,
        notify: Notify | None = None,
    ) -> None:
        self.store = store
        self.config = config
        self._steer = steer
        self._note = note
        self._notify = notify
        #: Ids of the pending flags, as of the last tick or raise.
        self.pending_ids: list[str] = []
        self._wake = asyncio.Event()

    async def raise_flag(
        self,
        question: str,
        *,
        default: str,
        options: Sequence[str] = (),
        job_id: str | None = None,
        session_id: str | None = None,
    ) -> FlagRecord:
        """Store a flag (the job goes on with ``default``), log it, notify."""
        chosen = check_flag_input(question, options, default)
        job_id = await running_job_of(self.store, session_id) or job_id
        flag = await self.store.create_flag(
            question,
            default=default,
            options=chosen,
            deadline_at=time.time() + self.config.timeout_s,
            job_id=job_id,
            session_id=session_id,
        )
        await self._log(flag, flag_event(flag))
        if self.config.notify_on_flag and self._notify is not None:
            await self._notify(f"Chorus flag {flag.id}", f"{question[:100]} (default: {default})")
        self.pending_ids.append(flag.id)
        return flag

    def wake(self) -> None:
        """Tick now (a decision was just written)."""
        self._wake.set()

    async def run(self) -> None:
        """Tick every ``check_every_s`` (or when woken) until cancelled."""
        while True:
            try:
                await self.tick()
            except (ChorusError, StoreError) as exc:
                log.warning("flags: %s", exc)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.config.check_every_s)
            self._wake.clear()

    async def tick(self, now: float | None = None) -> list[FlagRecord]:
        """Settle the deadlines that passed, then tell each job its decided flags."""
        await self.store.expire_flags(now)
        told = [await self._tell(flag) for flag in await self.store.due_flags()]
        self.pending_ids = [f.id for f in await self.store.list_flags(status="pending")]
        return told

    async def _tell(self, flag: FlagRecord) -> FlagRecord:
        await self._log(flag, flag_event(flag))
        delivery = "announced"
        if flag.overrules and flag.job_id:
            delivery = await self._deliver(flag)
        return await self.store.mark_flag_delivered(flag.id, delivery)

    async def _deliver(self, flag: FlagRecord) -> str:
        assert flag.job_id is not None
        try:
            result = await self._steer(flag.job_id, steer_text(flag))
        except (ChorusError, StoreError) as exc:
            log.warning("flag %s: could not tell job %s: %s", flag.id, flag.job_id, exc)
            return f"failed: {exc}"
        return str(result.get("how", "steered"))

    async def _log(self, flag: FlagRecord, event: Flag) -> None:
        if not flag.job_id:
            return
        try:
            await self._note(flag.job_id, event)
        except (ChorusError, StoreError) as exc:
            log.warning("flag %s: not logged in job %s: %s", flag.id, flag.job_id, exc)
