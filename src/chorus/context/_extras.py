"""What Chorus adds to a body it starts: the assembled context, the instructions and
MCP servers of the client that drives it, and Chorus's own MCP server (the session's
channel: an HTTP URL the daemon serves, ``chorus.bodies.channel_servers``).

A :class:`Brief` carries what the start is for: the task and plan the context is
assembled for, and a front's or brain's own system prompt,
instructions and MCP servers. For the turns a warm body takes later,
:func:`recall_block` makes the small "relevant memory" block put in front of a prompt:
the items the turn's prompt finds that the body was not given yet.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chorus.bodies import BodyOptions, McpServer, channel_servers
from chorus.config import ChorusConfig, load_config
from chorus.context._assemble import assemble
from chorus.memory import Hit, Memory, MemorySettings, item_line, memory_settings

log = logging.getLogger("chorus.context")

#: Items at most in one turn's "relevant memory" block.
RECALL_LIMIT = 5
#: How the context and the recall block name an item (``(memory m1a2b3…)``).
_ITEM_MARK = re.compile(r"\(memory (m[0-9a-z]+)\)")


@dataclass(frozen=True, slots=True)
class Brief:
    """What a body start is for, beyond its options."""

    #: The task (a job's prompt): picks the relevant memory items.
    task: str = ""
    #: The active job's plan (a framework's chosen plan, a handoff's plan).
    plan: str | None = None
    #: The client's own system prompt (``--system-prompt``, ``baseInstructions``):
    #: replaces the CLI's where the body can, else is added to it.
    system_prompt: str | None = None
    #: The client's text for the end of the system prompt (``--append-system-prompt``).
    instructions: str | None = None
    #: The client's own MCP servers (stdio), beside Chorus's.
    mcp_servers: Mapping[str, McpServer] = field(default_factory=dict)
    #: What of the client's request could not be passed on (told as warnings).
    skipped: tuple[str, ...] = ()


def client_brief(
    system_prompt: str | None,
    instructions: str | None,
    servers: Mapping[str, Any] | None,
) -> Brief:
    """A brief from what a client (a UCP brain, a front) asked for its body: stdio MCP
    servers are taken, any other kind is listed in :attr:`Brief.skipped`."""
    taken: dict[str, McpServer] = {}
    skipped: list[str] = []
    for name, spec in (servers or {}).items():
        server = _stdio_server(spec)
        if server is None:
            kind = spec.get("type", "?") if isinstance(spec, Mapping) else "?"
            skipped.append(f"MCP server {name!r} ({kind}) not passed: bodies take stdio ones")
        else:
            taken[name] = server
    return Brief(
        system_prompt=system_prompt or None,
        instructions=instructions or None,
        mcp_servers=taken,
        skipped=tuple(skipped),
    )


def _stdio_server(spec: Any) -> McpServer | None:
    if not isinstance(spec, Mapping) or spec.get("type", "stdio") != "stdio":
        return None
    command, args, env = spec.get("command"), spec.get("args") or [], spec.get("env") or {}
    if not isinstance(command, str) or not command or not isinstance(args, list):
        return None
    if not isinstance(env, Mapping):
        return None
    return McpServer(command, tuple(str(a) for a in args), {str(k): str(v) for k, v in env.items()})


def build_body_extras(
    session: Any,
    cwd: Path,
    task: str,
    *,
    config: ChorusConfig | None = None,
    plan: str | None = None,
) -> tuple[str | None, dict[str, McpServer]]:
    """``(context_text, mcp_servers)`` for a body starting in ``cwd`` on ``task`` for
    ``session`` (a record with ``.id``, an id, or None). Never raises: a context that
    cannot be built is logged and left out; the MCP server is still added (where the
    daemon serves the channel)."""
    session_id = getattr(session, "id", session)
    servers = channel_servers(session_id)
    table = config.memory if config is not None else None
    try:
        with Memory(settings=memory_settings(table)) as mem:
            context = assemble(cwd, task, memory=mem, plan=plan)
    except Exception:
        log.exception("context for session %s could not be assembled", session_id)
        return None, servers
    for note in context.notes:
        log.info("context for session %s: %s", session_id, note)
    return context.text, servers


def add_body_extras(
    options: BodyOptions,
    session: Any,
    config: ChorusConfig | None = None,
    brief: Brief | None = None,
    *,
    replaces_system_prompt: bool = False,
) -> BodyOptions:
    """``options`` with the context, the client's instructions and servers, and
    Chorus's MCP server added (synchronous: it reads a few files and the index, ~10 ms;
    the first run of the day also probes the system spec). ``replaces_system_prompt``:
    the body can take the client's system prompt in place of its CLI's own."""
    brief = brief or Brief()
    context, servers = build_body_extras(
        session, options.cwd, brief.task, config=config, plan=brief.plan
    )
    own = brief.system_prompt or None
    added = [None if replaces_system_prompt else own, brief.instructions, context]
    return dataclasses.replace(
        options,
        system_prompt=own if replaces_system_prompt else None,
        system_prompt_append="\n\n".join(t for t in added if t) or None,
        mcp_servers={**options.mcp_servers, **brief.mcp_servers, **servers},
    )


async def with_body_extras(
    options: BodyOptions, session: Any, job: Any, config: ChorusConfig | None = None
) -> BodyOptions:
    """``options`` with the context for ``job`` (a record with ``.prompt``) and
    Chorus's MCP server added; assembled in a thread (it reads files)."""
    config = config or load_config()
    brief = Brief(task=job.prompt)
    return await asyncio.to_thread(add_body_extras, options, session, config, brief)


# -- a warm body's later turns -----------------------------------------------------------


def context_items(text: str | None) -> set[str]:
    """The ids of the memory items a context (or recall block) names."""
    return set(_ITEM_MARK.findall(text or ""))


def recall_block(
    prompt: str,
    known: Collection[str],
    settings: MemorySettings,
    limit: int = RECALL_LIMIT,
    *,
    memory: Memory | None = None,
) -> tuple[str, list[str]]:
    """The "relevant memory" block for a turn on ``prompt`` (empty when nothing new is
    relevant) and the ids it names: the best items the prompt finds, among the top
    ``limit``, that are not in ``known`` (the body's context and earlier blocks).
    ``memory``: an open memory to search (its thread's); else one is opened for this."""
    count = min(limit, settings.top_n)
    if count <= 0 or not prompt.strip():
        return "", []
    opened = Memory(settings=settings) if memory is None else contextlib.nullcontext(memory)
    with opened as mem:
        return _block(mem.search(prompt, limit=count * 2), count, known)


def _block(found: list[Hit], count: int, known: Collection[str]) -> tuple[str, list[str]]:
    hits = [h for h in found if h.item is not None][:count]
    fresh = [h.item for h in hits if h.item is not None and h.item.id not in known]
    if not fresh:
        return "", []
    lines = [item_line(i) for i in fresh]
    block = "[Chorus: relevant memory for this message]\n" + "\n".join(lines)
    return block, [i.id for i in fresh]
