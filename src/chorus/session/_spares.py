"""Spare bodies: one pre-started CLI per recently used (body, cwd, start options), so
that even a new session skips the CLI's boot and handshake.

A spare is started with no session: its raw lines and permission asks go to
:class:`Redirect` holders that buffer (lines) or refuse (asks) until a session
adopts it, and its events wait in the body's own queue until that session's
driver reads them into its log. A spare is never given a turn before adoption,
so it carries no conversation. Each spare costs one idle CLI process (see the
README for the memory figures); they are off unless ``[daemon] spare_bodies``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field

from chorus.bodies import Body, PermissionAnswer, PermissionAsk
from chorus.store import Store

log = logging.getLogger("chorus.session")

#: What must match for a spare to serve a new session.
SpareKey = tuple[str, str, str | None, str, tuple[str, ...] | None]


@dataclass(eq=False)
class Redirect:
    """Where a spare's raw lines and permission asks go once a session adopts it."""

    store: Store
    session_id: str | None = None
    ask: Callable[[PermissionAsk], object] | None = None
    _lines: list[tuple[str, str]] = field(default_factory=list)

    def tap(self, stream: str, line: str) -> None:
        if self.session_id is None:
            self._lines.append((stream, line))
            return
        self.store.raw_tap(self.session_id)(stream, line)

    async def permission(self, ask: PermissionAsk) -> PermissionAnswer:
        if self.ask is None:  # cannot happen: a spare runs no turn before adoption
            return PermissionAnswer.deny("no session owns this body yet")
        answer = await self.ask(ask)  # type: ignore[misc]
        assert isinstance(answer, PermissionAnswer)
        return answer

    def adopt(self, session_id: str, ask: Callable[[PermissionAsk], object]) -> None:
        self.session_id, self.ask = session_id, ask
        tap = self.store.raw_tap(session_id)
        for stream, line in self._lines:
            tap(stream, line)
        self._lines.clear()


@dataclass(eq=False)
class Spare:
    body: Body
    redirect: Redirect


def _running(pid: object) -> bool:
    if not isinstance(pid, int):
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


class SparePool:
    """At most one spare per key; ``take`` hands one over, ``prime`` makes one."""

    def __init__(self) -> None:
        self._spares: dict[SpareKey, Spare] = {}
        self._priming: set[SpareKey] = set()

    def __len__(self) -> int:
        return len(self._spares)

    def describe(self) -> list[dict[str, object]]:
        """Each waiting spare: its body, cwd and process id."""
        return [
            {"body": key[0], "cwd": key[1], "pid": getattr(spare.body, "pid", None)}
            for key, spare in self._spares.items()
        ]

    def take(self, key: SpareKey) -> Spare | None:
        """The spare for ``key`` if one waits and its process still runs."""
        spare = self._spares.pop(key, None)
        if spare is None or not _running(getattr(spare.body, "pid", None)):
            return None  # none, or it died while it waited (its close reaps it)
        return spare

    async def prime(self, key: SpareKey, make: Callable[[], Spare]) -> None:
        """Start a spare for ``key`` unless one exists or is starting."""
        if key in self._spares or key in self._priming:
            return
        self._priming.add(key)
        try:
            spare = make()
            await spare.body.start()
            self._spares[key] = spare
        except Exception as exc:  # a spare is an optimization: never fail a job for it
            log.info("no spare body for %s: %s", key[0], exc)
        finally:
            self._priming.discard(key)

    async def close(self) -> None:
        spares = list(self._spares.values())
        self._spares.clear()
        for spare in spares:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(spare.body.close(), 10)
