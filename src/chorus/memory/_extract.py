"""Extraction at job end: a cheap one-shot body run turns the job's new talk into
memory items.

Input is only the job's own prompt and the assistant's final texts, never the
context Chorus injected (recalled memory would be learnt again, the feedback
loop seen in mem0's audit). The model also sees the existing items closest to
that talk, with their ids, so that it can say which one a new item
``supersedes``; everything it returns goes through :meth:`Memory.add` (dedup by
content hash, then word similarity). A failed job is skipped unless
``extract_failed`` is set, and so is a framework's own child job (a planner, a
voter). Extraction is on by default (``[memory] extraction``; where the config is
silent, ``CHORUS_MEMORY_EXTRACTION=0`` turns it off for one process tree).

It runs in the background (:class:`Extractions`): a job ends, and its session
takes the next turn, without waiting for the extraction run (up to
:data:`EXTRACTION_TIMEOUT_S`). The daemon awaits the runs under way when it
stops, for at most :data:`DRAIN_TIMEOUT_S`.

The pure parts (:func:`talk_of`, :func:`extraction_prompt`, :func:`parse_items`)
do no I/O; :func:`extract_job` asks the model and writes. The one-shot body run
is the session layer's (``BodyLauncher.ask_once``, handed in as the
:class:`Runner`): this package builds no body.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from chorus.config import ChorusConfig, MemorySettings, memory_settings
from chorus.events import Event, JobEnded, MemoryChanged, Text
from chorus.memory._log import record_changes
from chorus.memory._memory import Memory
from chorus.memory._model import ITEM_KINDS, MemoryItem
from chorus.memory._quote import item_line
from chorus.store import JobRecord, Store

log = logging.getLogger("chorus.memory")

#: The one-shot mode of each built-in body: the cheap way to ask one question.
ONE_SHOT = {"claude": "claude-print", "codex": "codex-exec", "gemini": "gemini-headless"}
MAX_TALK_CHARS = 12_000
EXTRACTION_TIMEOUT_S = 180.0
#: How long a stopping daemon waits for the extraction runs under way.
DRAIN_TIMEOUT_S = 10.0


@dataclass(frozen=True, slots=True)
class Extracted:
    kind: str
    text: str
    importance: float = 0.5
    supersedes: str | None = None


def talk_of(job: JobRecord, events: Sequence[Event]) -> str:
    """The job's prompt and the assistant's complete texts, oldest first, cut to
    :data:`MAX_TALK_CHARS` from the start (the end of a job says what was settled)."""
    lines = [f"USER: {job.prompt.strip()}"]
    for event in events:
        if event.job_id == job.id and isinstance(event, Text) and event.text.strip():
            lines.append(f"ASSISTANT: {event.text.strip()}")
    talk = "\n\n".join(lines)
    return talk[-MAX_TALK_CHARS:]


def extraction_prompt(talk: str, related: Sequence[MemoryItem]) -> str:
    known = "\n".join(item_line(i) for i in related) or "(none)"
    return (
        "You maintain a person's long-term memory. From the conversation below, list "
        "only what will still matter in later sessions: stable preferences, decisions, "
        "facts about the person or their projects, profile details, notable events, "
        "procedures they want followed. Skip small talk, one-off task details and "
        "anything already in the known items.\n\n"
        "Answer with a JSON array and nothing else. Each element: "
        f'{{"kind": one of {", ".join(ITEM_KINDS)}, "text": one self-contained '
        'sentence, "importance": 0..1, "supersedes": the id (m...) of a known item '
        "this one contradicts or replaces, or null}. An empty array is a fine answer.\n\n"
        f"Known items:\n{known}\n\nConversation:\n{talk}\n"
    )


def parse_items(reply: str) -> tuple[list[Extracted], list[str]]:
    """The items in the model's reply (a JSON array, possibly fenced in Markdown),
    and a warning for each element that does not fit."""
    match = re.search(r"\[.*\]", reply, re.DOTALL)
    if match is None:
        return [], [f"extraction reply holds no JSON array: {reply[:200]!r}"]
    try:
        raw = json.loads(match.group(0))
    except ValueError as exc:
        return [], [f"extraction reply is not valid JSON ({exc}): {reply[:200]!r}"]
    items, warnings = [], []
    for n, element in enumerate(raw if isinstance(raw, list) else []):
        item = _item(element)
        if item is None:
            warnings.append(f"extraction item {n} skipped: {json.dumps(element)[:200]}")
        else:
            items.append(item)
    return items, warnings


def _item(element: Any) -> Extracted | None:
    if not isinstance(element, dict):
        return None
    kind, text = element.get("kind"), element.get("text")
    if kind not in ITEM_KINDS or not isinstance(text, str) or not text.strip():
        return None
    importance = element.get("importance", 0.5)
    if not isinstance(importance, int | float) or not 0 <= importance <= 1:
        importance = 0.5
    supersedes = element.get("supersedes")
    return Extracted(kind, text.strip(), float(importance), supersedes or None)


def apply_items(
    mem: Memory,
    items: Sequence[Extracted],
    *,
    session_id: str | None,
    source_event: str | None,
    job_id: str | None = None,
    body: str | None = None,
) -> list[MemoryChanged]:
    """Write the items (dedup and supersede through :meth:`Memory.add`); a
    ``supersedes`` naming no active item is dropped, the item is still added. The
    items keep which job (and its body, its session) they were extracted from."""
    events: list[MemoryChanged] = []
    for item in items:
        old = mem.index.get_item(item.supersedes) if item.supersedes else None
        supersedes = old.id if old is not None and old.status == "active" else None
        result = mem.add(
            item.text,
            item.kind,
            source_kind="extraction",
            source_event=source_event,
            session_id=session_id,
            job_id=job_id,
            body=body,
            importance=item.importance,
            supersedes=supersedes,
        )
        events += result.events
    return events


# -- running it --------------------------------------------------------------------


class Runner(Protocol):
    """Runs one prompt on a fresh one-shot ``body`` (read-only, in an empty folder,
    none of Chorus's context) and returns the model's final text."""

    async def __call__(
        self,
        body: str,
        prompt: str,
        *,
        model: str | None,
        timeout: float,  # noqa: ASYNC109 - the run's own turn deadline
    ) -> str: ...


async def extract_job(
    job: JobRecord, ended: JobEnded, store: Store, config: ChorusConfig, run: Runner
) -> list[MemoryChanged]:
    """Extract and write the memory items of a finished job (see the module doc)."""
    settings = memory_settings(config.memory)
    if not wanted(settings, job, ended):
        return []
    session_id = job.session_id or ""
    events = [e for e in await store.read_events(session_id) if e.job_id == job.id]
    talk = talk_of(job, events)
    with Memory(settings=settings) as mem:
        related = [h.item for h in mem.search(talk[-2000:], limit=8) if h.item is not None]
    body = settings.extraction_body or ONE_SHOT.get(job.body or "", job.body or "claude-print")
    prompt = extraction_prompt(talk, related)
    model, limit = settings.extraction_model, EXTRACTION_TIMEOUT_S
    reply = await run(body, prompt, model=model, timeout=limit)
    items, warnings = parse_items(reply)
    for warning in warnings:
        log.warning("job %s: %s", job.id, warning)
    with Memory(settings=settings) as mem:
        changes = apply_items(
            mem,
            items,
            session_id=job.session_id,
            source_event=f"{job.session_id}:{ended.seq}",
            job_id=job.id,
            body=job.body,
        )
    await record_changes(store, changes, session_id)
    return changes


def wanted(settings: MemorySettings, job: JobRecord, ended: JobEnded) -> bool:
    """Whether ``job``'s end calls for an extraction run (see the module doc)."""
    if not settings.extraction or not job.session_id or job.options.get("system"):
        return False
    return ended.state == "succeeded" or (settings.extract_failed and ended.state == "failed")


class Extractions:
    """The extraction runs under way. :meth:`hook` is the supervisor's outcome hook: it
    starts a run in the background and returns at once; :meth:`drain` awaits the runs
    (the daemon calls it when it stops). A failed run is logged; it never changes the
    job's outcome."""

    def __init__(self, store: Store, config: ChorusConfig, run: Runner) -> None:
        self.store = store
        self.config = config
        self._run = run
        self._tasks: set[asyncio.Task[None]] = set()

    def __len__(self) -> int:
        return len(self._tasks)

    async def hook(self, job: JobRecord, ended: JobEnded) -> None:
        if not wanted(memory_settings(self.config.memory), job, ended):
            return
        task = asyncio.create_task(self._extract(job, ended), name=f"extract-{job.id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _extract(self, job: JobRecord, ended: JobEnded) -> None:
        try:
            changes = await extract_job(job, ended, self.store, self.config, self._run)
        except Exception:
            log.exception("memory extraction after job %s failed", job.id)
            return
        if changes:
            log.info("job %s: %d memory writes from extraction", job.id, len(changes))

    async def drain(self, patience: float = DRAIN_TIMEOUT_S) -> None:
        """Await the runs under way; those still running after ``patience`` seconds are
        cancelled (their one-shot bodies closed) and logged."""
        tasks = set(self._tasks)
        if not tasks:
            return
        _, late = await asyncio.wait(tasks, timeout=patience)
        for task in late:
            log.warning("%s cut short: the daemon is stopping", task.get_name())
            task.cancel()
        if late:
            await asyncio.wait(late)
