"""What Chorus adds to a body it starts: the assembled context and its MCP server."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from pathlib import Path
from typing import Any

from chorus.bodies import BodyOptions, McpServer
from chorus.config import ChorusConfig, load_config
from chorus.context._assemble import assemble
from chorus.mcpserver import SERVER_NAME, server_command
from chorus.memory import Memory, memory_settings

log = logging.getLogger("chorus.context")


def build_body_extras(
    session: Any,
    cwd: Path,
    task: str,
    *,
    config: ChorusConfig | None = None,
    job_id: str | None = None,
    plan: str | None = None,
) -> tuple[str | None, dict[str, McpServer]]:
    """``(system_prompt_append, mcp_servers)`` for a body starting in ``cwd`` on
    ``task`` for ``session`` (a record with ``.id``, an id, or None). Put them in
    ``BodyOptions``. Never raises: a context that cannot be built is logged and
    left out; the MCP server is still added."""
    session_id = getattr(session, "id", session)
    servers = {SERVER_NAME: server_command(session_id, job_id)}
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


async def with_body_extras(
    options: BodyOptions, session: Any, job: Any, config: ChorusConfig | None = None
) -> BodyOptions:
    """``options`` with the context and Chorus's MCP server for ``job`` (a record with
    ``.id`` and ``.prompt``) added; assembled in a thread (it reads files)."""
    config = config or load_config()
    append, servers = await asyncio.to_thread(
        build_body_extras, session, options.cwd, job.prompt, config=config, job_id=job.id
    )
    return dataclasses.replace(
        options, system_prompt_append=append, mcp_servers={**options.mcp_servers, **servers}
    )


def add_body_extras(
    options: BodyOptions, session: Any, config: ChorusConfig | None = None, task: str = ""
) -> BodyOptions:
    """``options`` with the context and Chorus's MCP server added (synchronous: it
    reads a few files and the index, ~10 ms; the first run of the day also probes
    the system spec)."""
    append, servers = build_body_extras(session, options.cwd, task, config=config)
    return dataclasses.replace(
        options, system_prompt_append=append, mcp_servers={**options.mcp_servers, **servers}
    )
