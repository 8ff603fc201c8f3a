"""Memory writes into the event log: each write is also a :class:`MemoryChanged`.

A write made inside a session (a body's ``memory_write`` call, the extraction
after a job) is logged in that session; one made outside any session (``chorus
memory add``) goes to the session :data:`MEMORY_SESSION`, created on first use.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

from chorus.events import MemoryChanged
from chorus.store import ORIGIN_CHORUS, SessionExistsError, Store, UnknownSessionError

#: The session that holds memory writes made outside any session.
MEMORY_SESSION = "memory"


async def record_changes(
    store: Store, events: Sequence[MemoryChanged], session_id: str | None = None
) -> str:
    """Append ``events`` to ``session_id`` (or :data:`MEMORY_SESSION` when it is None
    or unknown); returns the session written to."""
    if not events:
        return session_id or MEMORY_SESSION
    target = session_id or MEMORY_SESSION
    try:
        await store.append_many(target, list(events), origin=ORIGIN_CHORUS)
    except UnknownSessionError:
        target = await _memory_session(store)
        await store.append_many(target, list(events), origin=ORIGIN_CHORUS)
    return target


async def _memory_session(store: Store) -> str:
    try:
        await store.get_session(MEMORY_SESSION)
    except UnknownSessionError:
        # Another process may make it meanwhile.
        with contextlib.suppress(SessionExistsError):
            await store.create_session("chorus", session_id=MEMORY_SESSION, state="active")
    return MEMORY_SESSION
