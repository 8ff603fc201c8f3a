"""Bodies that outlive the daemon: where they run, what the store keeps of
them, and how a restarted daemon finds its place in their output again.

A detachable body of a stored session runs under ``CHORUS_HOME/run/bodies/<session>/``
(see :class:`chorus.bodies.DetachedTransport`). The session keeps a *snapshot* of it
in the stored session's ``transport["body_handle"]``: the process (pid and start
time), the stdout position just after the last event handed out, and ``seq``, the
session's last stored seq at that moment (every event handed out by then is stored,
none handed out later is). It is written when the body starts and at every turn's
end; it never has to be newer, because what came after it is counted in the log:
the events stored after ``seq`` with codec origin are exactly the first stdout
events after that position (the session stores a body's events in the order it
takes them, and the store commits a prefix of its writes). A new owner reads
stdout from the snapshot's position and skips that many events: nothing is lost,
nothing is handed out twice, however often the daemon died in between.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
from dataclasses import dataclass, replace
from pathlib import Path

from chorus._errors import ChorusError
from chorus.bodies import Body, BodyHandle, BodyOptions, body_class, process_start_time
from chorus.config import ChorusConfig, run_dir
from chorus.events import Event, TurnCompleted, TurnFailed
from chorus.store import ORIGIN_CODEC, SessionRecord, Store, event_origin

#: The key of the snapshot in a stored session's ``transport``.
HANDLE_KEY = "body_handle"


def bodies_dir() -> Path:
    """``CHORUS_HOME/run/bodies``: one directory per detached body's session."""
    return run_dir() / "bodies"


def detached_options(
    options: BodyOptions, body: str, session_id: str | None, config: ChorusConfig
) -> BodyOptions:
    """``options`` with the session's run directory, for a detachable body of a
    stored session (a spare, with no session yet, stays attached to us)."""
    if session_id is None or options.run_dir is not None:
        return options
    try:
        detachable = body_class(body, config).detachable
    except ChorusError:  # a body only a test's factory knows
        return options
    if not detachable:
        return options
    return replace(options, run_dir=bodies_dir() / session_id)


def counted(event: Event) -> bool:
    """Whether ``event`` counts as handed out by the codec (see the module doc)."""
    return event_origin(event) == ORIGIN_CODEC


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A stored body handle and the seq it is good for."""

    handle: BodyHandle
    seq: int

    def as_dict(self) -> dict[str, object]:
        return {**self.handle.as_dict(), "seq": self.seq}

    @property
    def alive(self) -> bool:
        """The very process of the handle still runs (never a reused pid)."""
        started = self.handle.started
        return started is not None and process_start_time(self.handle.pid) == started


def snapshot_of(record: SessionRecord) -> Snapshot | None:
    """The stored snapshot of ``record``'s detached body, if any (and well formed)."""
    data = record.transport.get(HANDLE_KEY)
    if not isinstance(data, dict):
        return None
    try:
        return Snapshot(BodyHandle.from_dict(data), int(str(data.get("seq", 0))))
    except (KeyError, TypeError, ValueError):
        return None


async def save_snapshot(store: Store, session_id: str, body: Body) -> None:
    """Store where ``body``'s output stands now. Call only when every event the
    session took from the body is stored (after a flush), from its driver."""
    handle = body.handle()
    if handle is None:
        return
    seq, fresh = await asyncio.gather(store.last_seq(session_id), store.get_session(session_id))
    snap = Snapshot(handle, seq)
    transport = {**fresh.transport, HANDLE_KEY: snap.as_dict()}
    await store.update_session(session_id, transport=transport)
    body.forget_stored(handle.offset)  # bounded files: the output before it is stored


def keep_flag() -> Path:
    """While this file exists the hub leaves detached bodies running when it stops
    (``chorus stop --keep-bodies``); the next daemon re-attaches, and removes it."""
    return run_dir() / "keep-bodies"


async def handed_out(store: Store, session_id: str, snap: Snapshot) -> int:
    """How many codec events after the snapshot a previous owner stored."""
    return len(await store.read_events(session_id, from_seq=snap.seq + 1, origin=ORIGIN_CODEC))


async def job_turn(store: Store, session_id: str, job_id: str) -> tuple[bool, Event | None]:
    """Where the job's turn stands in the log: (started, terminal event or None)."""
    events = await store.read_events(session_id, origin=ORIGIN_CODEC)
    mine = [e for e in events if e.job_id == job_id]
    if not mine:
        return False, None
    last = mine[-1]
    return True, last if isinstance(last, TurnCompleted | TurnFailed) else None


def discard(snap: Snapshot) -> None:
    """A body we will not re-attach to: end it (if it is still the same process)
    and remove its files."""
    if snap.alive:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(snap.handle.pid, signal.SIGKILL)
    shutil.rmtree(snap.handle.run_dir, ignore_errors=True)
