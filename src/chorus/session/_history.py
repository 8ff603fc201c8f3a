"""A session's conversation from Chorus's own log, for a body that cannot resume it
natively (``BodyOptions.history``)."""

from __future__ import annotations

from chorus.router import transcript_bundle
from chorus.store import Store

_CHARS_PER_TOKEN = 4


async def session_history(store: Store, session_id: str, tokens: int) -> str | None:
    """The session's transcript (its jobs' prompts and what the bodies said and did),
    newest turns kept within about ``tokens`` tokens; ``None`` for an empty log."""
    events = await store.read_events(session_id)
    jobs = await store.list_jobs(session_id=session_id)
    prompts = {job.id: job.prompt for job in jobs}
    return transcript_bundle(events, tokens * _CHARS_PER_TOKEN, prompts=prompts)
