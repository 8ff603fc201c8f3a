"""Permission asks that reach the brains attached to a session.

When the policy's verdict on a tool call is *ask*, the gate raises a flag (a
person may answer it; at its deadline its default holds). If brains are attached
to the session and said they take asks, the first one is asked too, and its
answer is applied by the session's ``brain.authority``:

* ``governing``: the brain's allow or deny settles the flag;
* ``escalate-only`` (default): a deny settles it, an allow is only logged (a
  person or the default still decides);
* ``advisory``: the answer is logged only.

Only asks reach a brain, so nothing the policy denies can be allowed by one.
Every answer is a notice in the session's log and, when it settles the flag, an
audit entry with ``source = brain``.

A brain may also *review* the calls the policy allows (a front, whose client's own
CLI asks about calls Chorus's policy lets through): it is asked about each one no
flag put to a brain already, and its deny denies (logged, audited, ``source =
brain``); its allow changes nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from chorus.permissions import PermissionAnswer, PermissionAsk
from chorus.policy import FlagError, PendingFlag

if TYPE_CHECKING:  # the policy's engine loads with the first gate, not at the start
    from chorus.policy import PolicyGate

log = logging.getLogger("chorus.session")

Decision = Literal["allow", "deny"]
Authority = Literal["advisory", "escalate-only", "governing"]


@dataclass(frozen=True, slots=True)
class BrainAnswer:
    decision: Decision
    message: str | None = None


#: Ask one brain about a flag; None when it gave no usable answer.
Asker = Callable[[PendingFlag], Awaitable[BrainAnswer | None]]
#: Where the session logs what a brain said.
Note = Callable[[str], Awaitable[None]]
#: Put a call the policy allowed to one brain (the Unix time its answer is due by).
Reviewer = Callable[[PermissionAsk, float], Awaitable[BrainAnswer | None]]
#: How long a review may wait when no policy says (``[ask] timeout_s``).
REVIEW_TIMEOUT_S = 300.0


def settles(authority: Authority, decision: Decision) -> bool:
    """Whether a brain's ``decision`` settles the ask under ``authority``."""
    if authority == "governing":
        return True
    return authority == "escalate-only" and decision == "deny"


class BrainAsks:
    """The askers attached to one session, and the asks in flight."""

    def __init__(self, authority: Authority, note: Note) -> None:
        self.authority = authority
        self._note = note
        self._askers: list[Asker] = []
        self._reviewers: list[Reviewer] = []
        #: Calls a brain was asked about through their flag (not reviewed again).
        self._flagged: set[str] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    def add(self, asker: Asker) -> None:
        self._askers.append(asker)

    def remove(self, asker: Asker) -> None:
        with contextlib.suppress(ValueError):
            self._askers.remove(asker)

    def add_reviewer(self, reviewer: Reviewer) -> None:
        self._reviewers.append(reviewer)

    def remove_reviewer(self, reviewer: Reviewer) -> None:
        with contextlib.suppress(ValueError):
            self._reviewers.remove(reviewer)

    def hook(self, gate: PolicyGate) -> Callable[[PendingFlag], None]:
        """The gate's ``on_flag``: ask the first attached brain, without blocking."""

        def on_flag(flag: PendingFlag) -> None:
            if not self._askers:
                return
            call_id = (flag.ask or {}).get("call_id")
            if isinstance(call_id, str):
                self._flagged.add(call_id)
            task = asyncio.create_task(self._ask(self._askers[0], gate, flag))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

        return on_flag

    async def _ask(self, asker: Asker, gate: PolicyGate, flag: PendingFlag) -> None:
        try:
            async with asyncio.timeout(max(0.0, flag.expires - time.time())):
                answer = await asker(flag)
        except (TimeoutError, ConnectionError) as exc:
            log.info("no brain answer to flag %s: %r", flag.id, exc)
            return
        if answer is not None:
            await self._apply(gate, flag, answer)

    async def _apply(self, gate: PolicyGate, flag: PendingFlag, answer: BrainAnswer) -> None:
        applied = settles(self.authority, answer.decision)
        if applied:
            with contextlib.suppress(FlagError):  # a person or the deadline came first
                gate.flags.answer(flag.id, answer.decision, note=answer.message, source="brain")
        how = "applied" if applied else f"logged only ({self.authority})"
        why = f": {answer.message}" if answer.message else ""
        await self._note(f"brain answered {flag.tool} ({flag.id}) {answer.decision}{why}; {how}")

    async def review(
        self, gate: PolicyGate | None, ask: PermissionAsk, answer: PermissionAnswer
    ) -> PermissionAnswer:
        """``answer`` (the policy's), or the first reviewer's deny of a call it allowed."""
        flagged = ask.call_id in self._flagged
        self._flagged.discard(ask.call_id or "")
        if answer.decision != "allow" or not self._reviewers or flagged:
            return answer
        timeout = gate.engine.policy.ask.timeout_s if gate is not None else REVIEW_TIMEOUT_S
        said = await self._reviewed(self._reviewers[0], ask, timeout)
        if said.decision == "allow":
            return answer
        message = said.message or f"the brain denied this {ask.tool} call"
        await self._note(f"brain denied {ask.tool} ({ask.call_id}) on review: {message}")
        if gate is not None and gate.audit is not None:
            gate.audit.append("permission_decision", _review_entry(gate, ask, message))
        return PermissionAnswer.deny(message)

    @staticmethod
    async def _reviewed(reviewer: Reviewer, ask: PermissionAsk, wait_s: float) -> BrainAnswer:
        """The reviewer's answer; a deny when it gives none in ``wait_s`` s."""
        try:
            async with asyncio.timeout(wait_s):
                said = await reviewer(ask, time.time() + wait_s)
        except (TimeoutError, ConnectionError) as exc:
            log.info("no brain review of %s: %r", ask.call_id, exc)
            said = None
        return said or BrainAnswer("deny", "the brain reviewing this call gave no answer")

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


def _review_entry(gate: PolicyGate, ask: PermissionAsk, message: str) -> dict[str, object]:
    return {
        "body": ask.body,
        "tool": ask.tool,
        "native_tool": ask.native_tool,
        "call_id": ask.call_id,
        "input": ask.input,
        "cwd": ask.cwd,
        "mode": gate.mode,
        "decision": "deny",
        "source": "brain",
        "rule": "brain_review",
        "reason": message,
    }
