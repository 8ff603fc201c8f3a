"""Claude Code's command line as ``chorus-claude`` takes it (sans-I/O): the flags the
Claude Agent SDK passes (``--allowedTools``, ``--mcp-config``, ``--permission-mode``
...); unknown ones are ignored, as new SDK releases add flags."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from chorus.events import JsonDict

BODY_ENV = "CHORUS_BODY"
#: Flags that take a value (``--flag value`` or ``--flag=value``); others are switches.
VALUE_FLAGS = frozenset(
    {
        "--output-format", "--input-format", "--system-prompt", "--append-system-prompt",
        "--allowedTools", "--allowed-tools", "--disallowedTools", "--disallowed-tools",
        "--max-turns", "--max-budget-usd", "--model", "--fallback-model", "--permission-mode",
        "--resume", "--session-id", "--add-dir", "--mcp-config", "--setting-sources",
        "--permission-prompt-tool", "--thinking", "--effort", "--tools", "--betas",
        "--settings", "--plugin-dir", "--json-schema", "--max-thinking-tokens",
        "--resume-session-at", "--agents", "--chorus-body", "--debug-file", "--task-budget",
        "--thinking-display", "--fork-session-id", "--system-prompt-file",
        "--append-system-prompt-file",
    }
)  # fmt: skip
STREAM_JSON = "stream-json"


class UsageError(Exception):
    """A command line ``chorus-claude`` cannot run with (exit 2)."""


@dataclass(frozen=True)
class ClaudeArgs:
    """What ``chorus-claude`` takes from Claude Code's command line."""

    body: str | None = None
    model: str | None = None
    permission_mode: str | None = None
    resume: str | None = None
    partials: bool = False
    prompt_tool: str | None = None
    max_turns: int | None = None
    version: bool = False
    ignored: tuple[str, ...] = ()
    #: The body's instructions and MCP servers (``--system-prompt``,
    #: ``--append-system-prompt``, ``--mcp-config``), as UCP ``initialize`` takes them.
    system_prompt: str | None = None
    append_system_prompt: str | None = None
    mcp_servers: JsonDict | None = None
    #: Claude Code's permission rules (``--allowedTools``, ``--disallowedTools``) and
    #: the folders added to the working one (``--add-dir``).
    allowed_tools: tuple[str, ...] = ()
    disallowed_tools: tuple[str, ...] = ()
    add_dirs: tuple[str, ...] = ()


def parse_argv(argv: Sequence[str], env: dict[str, str]) -> ClaudeArgs:
    """Claude Code's flags; unknown ones are ignored (new SDKs add flags), a flag
    missing its value or a format other than stream-json raises :class:`UsageError`."""
    values, switches, ignored, dirs = _split(list(argv))
    for name in ("--output-format", "--input-format"):
        if values.get(name, STREAM_JSON) != STREAM_JSON:
            raise UsageError(f"{name} {values[name]!r}: chorus-claude speaks only stream-json")
    turns = values.get("--max-turns")
    if turns is not None and not turns.isdigit():
        raise UsageError(f"--max-turns {turns!r}: expected a whole number")
    return ClaudeArgs(
        body=values.get("--chorus-body") or env.get(BODY_ENV) or None,
        model=values.get("--model"),
        permission_mode=values.get("--permission-mode"),
        resume=values.get("--resume"),
        partials="--include-partial-messages" in switches,
        prompt_tool=values.get("--permission-prompt-tool"),
        max_turns=int(turns) if turns is not None else None,
        version=bool({"-v", "--version"} & switches),
        ignored=tuple(ignored),
        system_prompt=_text_flag(values, "--system-prompt"),
        append_system_prompt=_text_flag(values, "--append-system-prompt"),
        mcp_servers=mcp_config(values["--mcp-config"]) if "--mcp-config" in values else None,
        allowed_tools=tool_rules(values.get("--allowedTools") or values.get("--allowed-tools")),
        disallowed_tools=tool_rules(
            values.get("--disallowedTools") or values.get("--disallowed-tools")
        ),
        add_dirs=tuple(dirs),
    )


def tool_rules(raw: str | None) -> tuple[str, ...]:
    """``--allowedTools "Read,Bash(git diff:*)"``: the rules, split at the commas (and
    the blanks) outside parentheses."""
    rules: list[str] = []
    depth, current = 0, ""
    for char in raw or "":
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth == 0 and (char == "," or (char == " " and "(" not in current)):
            rules.append(current)
            current = ""
        else:
            current += char
    return tuple(rule.strip() for rule in [*rules, current] if rule.strip())


def _text_flag(values: dict[str, str], name: str) -> str | None:
    """``--NAME TEXT`` or ``--NAME-file PATH`` (an empty text is none: the SDK passes
    ``--system-prompt ""`` when its program sets no system prompt)."""
    path = values.get(f"{name}-file")
    if path is None:
        return values.get(name) or None
    try:
        return Path(path).read_text() or None
    except OSError as exc:
        raise UsageError(f"{name}-file {path!r}: {exc.strerror}") from exc


def mcp_config(raw: str) -> JsonDict:
    """``--mcp-config``'s servers: a JSON object ``{"mcpServers": {...}}`` given inline
    or in a file."""
    text = raw
    if not raw.lstrip().startswith("{"):
        try:
            text = Path(raw).read_text()
        except OSError as exc:
            raise UsageError(f"--mcp-config {raw!r}: {exc.strerror}") from exc
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise UsageError(f"--mcp-config: not JSON ({exc})") from exc
    servers = data.get("mcpServers") if isinstance(data, dict) else None
    if not isinstance(servers, dict):
        raise UsageError('--mcp-config: expected {"mcpServers": {...}}')
    return servers


def _split(args: list[str]) -> tuple[dict[str, str], set[str], list[str], list[str]]:
    values: dict[str, str] = {}
    switches: set[str] = set()
    ignored: list[str] = []
    dirs: list[str] = []
    while args:
        arg = args.pop(0)
        name, eq, inline = arg.partition("=")
        if name in VALUE_FLAGS:
            if not eq and (not args or args[0].startswith("--")):
                raise UsageError(f"{name} needs a value")
            values[name] = inline if eq else args.pop(0)
            if name == "--add-dir":
                dirs.append(values[name])
        elif arg.startswith("-"):
            switches.add(name)
            if name not in {"-v", "--version", "--verbose", "--include-partial-messages"}:
                ignored.append(name)
        else:
            ignored.append(arg)  # a positional (prompt mode is not supported)
    return values, switches, ignored, dirs
