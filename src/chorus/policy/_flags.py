"""Flags: a permission ``ask`` that a person can answer, with a default after a timeout.

A flag is a file, so the daemon that raised it and the CLI that answers it
(``chorus flag answer ID allow``) need share nothing but ``CHORUS_HOME``::

    CHORUS_HOME/flags/<id>.json          the question (redacted), its default and deadline
    CHORUS_HOME/flags/<id>.answer.json   the answer; created with O_EXCL, so the first
                                         answer wins (a person, or the timeout default)

:meth:`FlagBoard.wait` polls for the answer and, at the deadline, writes the
default itself through the same O_EXCL path, so a person answering at the last
moment and the timeout can never both win. Work never blocks for longer than
the flag's timeout.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from chorus.config import chorus_home
from chorus.permissions import PermissionAsk
from chorus.policy._errors import FlagError, PolicyError
from chorus.policy._redact import RedactorLike, default_redactor

AnswerSource = Literal["person", "brain", "timeout"]


def flags_dir() -> Path:
    """``CHORUS_HOME/flags`` (not created)."""
    return chorus_home() / "flags"


@dataclass(frozen=True, slots=True)
class PendingFlag:
    """A question waiting for a person. ``expires`` is a Unix time."""

    id: str
    created: float
    expires: float
    default: Literal["allow", "deny"]
    reason: str
    body: str
    tool: str
    summary: str
    session_id: str | None = None
    ask: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class FlagAnswer:
    """How a flag was settled."""

    id: str
    decision: Literal["allow", "deny"]
    source: AnswerSource
    answered_at: float
    note: str | None = None


def summarize(ask: PermissionAsk) -> str:
    """One line saying what the tool wants to do, for a person deciding."""
    value = ask.input.get("command") or ask.input.get("cmd")
    if isinstance(value, list):
        value = " ".join(str(v) for v in value)
    if not value:
        value = ask.input.get("file_path") or ask.input.get("path") or ask.input.get("url")
    if not value:
        value = ask.description or json.dumps(ask.input, ensure_ascii=False)
    text = f"{ask.body} {ask.native_tool}: {value}"
    return text if len(text) <= 200 else text[:197] + "..."


def _write_exclusive(path: Path, payload: dict[str, Any]) -> bool:
    """Create ``path`` with ``payload`` unless it exists; True if this call created it."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(payload, handle)
    return True


class FlagBoard:
    """Raise, list, answer and await flags under ``root`` (default ``CHORUS_HOME/flags``)."""

    def __init__(
        self,
        root: Path | None = None,
        *,
        redactor: RedactorLike | None = None,
        poll_interval: float = 0.2,
    ) -> None:
        self.root = root or flags_dir()
        self._redactor = redactor
        self.poll_interval = poll_interval

    @property
    def redactor(self) -> RedactorLike:
        """The redactor flags are written through (default: :func:`default_redactor`)."""
        if self._redactor is None:
            self._redactor = default_redactor()
        return self._redactor

    def _flag_path(self, flag_id: str) -> Path:
        if not flag_id.replace("-", "").isalnum():
            raise FlagError(f"{flag_id!r} is not a flag id")
        return self.root / f"{flag_id}.json"

    def _answer_path(self, flag_id: str) -> Path:
        return self._flag_path(flag_id).with_name(f"{flag_id}.answer.json")

    def raise_flag(
        self,
        ask: PermissionAsk,
        *,
        reason: str,
        default: Literal["allow", "deny"],
        timeout_s: float,
        session_id: str | None = None,
    ) -> PendingFlag:
        """Write a new flag for ``ask`` (redacted) and return it."""
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        now = time.time()
        flag = PendingFlag(
            id=f"f-{secrets.token_hex(4)}",
            created=now,
            expires=now + timeout_s,
            default=default,
            reason=self.redactor.redact_text(reason),
            body=ask.body,
            tool=ask.tool,
            summary=self.redactor.redact_text(summarize(ask)),
            session_id=session_id,
            ask=self.redactor.redact_json(
                {
                    "native_tool": ask.native_tool,
                    "input": ask.input,
                    "cwd": ask.cwd,
                    "call_id": ask.call_id,  # the tool call's own id (a front shows it)
                }
            ),
        )
        if not _write_exclusive(self._flag_path(flag.id), asdict(flag)):
            # 32 random bits under one folder: a collision means something else is wrong.
            raise PolicyError(f"flag id collision: {flag.id}")
        return flag

    def get(self, flag_id: str) -> PendingFlag:
        """The flag ``flag_id``; :class:`FlagError` if there is none."""
        try:
            raw = json.loads(self._flag_path(flag_id).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise FlagError(f"no flag {flag_id!r}") from None
        return PendingFlag(**raw)

    def answer_of(self, flag_id: str) -> FlagAnswer | None:
        """The answer to ``flag_id``, or ``None`` while it is open."""
        try:
            raw = json.loads(self._answer_path(flag_id).read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        return FlagAnswer(**raw)

    def pending(self) -> list[PendingFlag]:
        """Open flags, oldest first."""
        if not self.root.exists():
            return []
        flags = [
            self.get(p.name.removesuffix(".json"))
            for p in self.root.glob("f-*.json")
            if not p.name.endswith(".answer.json")
        ]
        return sorted((f for f in flags if self.answer_of(f.id) is None), key=lambda f: f.created)

    def answer(
        self,
        flag_id: str,
        decision: Literal["allow", "deny"],
        *,
        note: str | None = None,
        source: AnswerSource = "person",
    ) -> FlagAnswer:
        """Settle ``flag_id``. Raises :class:`FlagError` if it is unknown or already settled."""
        self.get(flag_id)
        answer = FlagAnswer(flag_id, decision, source, time.time(), note)
        if not _write_exclusive(self._answer_path(flag_id), asdict(answer)):
            settled = self.answer_of(flag_id)
            by = f" ({settled.decision}, by {settled.source})" if settled else ""
            raise FlagError(f"flag {flag_id} was already answered{by}")
        return answer

    async def wait(self, flag: PendingFlag) -> FlagAnswer:
        """Wait for a person's answer; at ``flag.expires`` settle it with the default."""
        while True:
            answer = self.answer_of(flag.id)
            if answer is not None:
                return answer
            remaining = flag.expires - time.time()
            if remaining <= 0:
                try:
                    return self.answer(flag.id, flag.default, source="timeout")
                except FlagError:
                    continue  # a person answered in the same instant; read theirs
            await asyncio.sleep(min(self.poll_interval, remaining))
