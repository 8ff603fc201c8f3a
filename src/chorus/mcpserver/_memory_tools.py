"""The first tools: ``memory_search``, ``memory_write``, ``notify_user``."""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import subprocess

from chorus.events import Notice
from chorus.mcpserver._registry import ToolContext, ToolFn, register_tool
from chorus.memory import ITEM_KINDS, Memory, MemoryInputError, record_changes
from chorus.store import ORIGIN_CHORUS, SqliteStore, UnknownSessionError


@register_tool(
    "memory_search",
    "Search what Chorus remembers for this person (typed memory items, MEMORY.md, "
    "daily notes). Returns JSON: a list of {ref, source, kind, text, score}.",
)
def memory_search(ctx: ToolContext) -> ToolFn:
    async def run(query: str, limit: int = 8) -> str:
        with Memory.open(ctx.memory_table) as mem:
            hits = mem.search(query, limit=max(1, min(limit, 50)))
        return json.dumps([_hit(h.ref, h.source, h.item, h.text, h.score) for h in hits])

    return run


def _hit(ref: str, source: str, item: object, text: str, score: float) -> dict[str, object]:
    kind = getattr(item, "kind", None)
    return {"ref": ref, "source": source, "kind": kind, "text": text, "score": round(score, 6)}


@register_tool(
    "memory_write",
    "Save something worth remembering across sessions: a lasting preference, decision, "
    f"fact, profile detail, event or procedure (kind: one of {', '.join(ITEM_KINDS)}). "
    "importance is 0..1. To replace an item that is no longer true, pass its id as "
    "supersedes. A duplicate reinforces the existing item instead of adding one.",
)
def memory_write(ctx: ToolContext) -> ToolFn:
    async def run(
        text: str, kind: str = "fact", importance: float = 0.5, supersedes: str | None = None
    ) -> str:
        try:
            with Memory.open(ctx.memory_table) as mem:
                result = mem.add(
                    text,
                    kind,
                    source_kind="agent",
                    session_id=ctx.session_id,
                    importance=importance,
                    supersedes=supersedes or None,
                )
        except MemoryInputError as exc:
            return f"error: {exc}"
        async with SqliteStore() as store:
            await record_changes(store, result.events, ctx.session_id)
        return json.dumps({"id": result.item.id, "op": result.op, "kind": result.item.kind})

    return run


@register_tool(
    "notify_user",
    "Tell the person something now (a desktop notification where there is one, and "
    "a notice in the session's log). Use sparingly: for results or questions that "
    "should not wait for the end of the job.",
)
def notify_user(ctx: ToolContext) -> ToolFn:
    async def run(message: str, title: str = "Chorus") -> str:
        notice = Notice(message=f"{title}: {message}", kind="notify_user")
        async with SqliteStore() as store:
            with contextlib.suppress(UnknownSessionError):
                if ctx.session_id:
                    await store.append(ctx.session_id, notice, origin=ORIGIN_CHORUS)
        shown = await _desktop(title, message)
        return "notified" + ("" if shown else " (logged; no desktop notifier on this machine)")

    return run


async def _desktop(title: str, message: str) -> bool:
    if shutil.which("notify-send") is None:
        return False
    with contextlib.suppress(OSError):
        proc = await asyncio.create_subprocess_exec(
            "notify-send", title, message, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(proc.wait(), 5)
        return proc.returncode == 0
    return False
