"""Command lines and environment for the Claude Code CLI (both modes)."""

from __future__ import annotations

from pathlib import Path

from chorus.agents import find_agent
from chorus.bodies._body import BodyOptions
from chorus.bodies._transport import SpawnSpec

#: Bidirectional stream-json with the control protocol and live deltas.
BIDI_FLAGS: tuple[str, ...] = (
    "-p",
    "--input-format",
    "stream-json",
    "--output-format",
    "stream-json",
    "--verbose",
    "--include-partial-messages",
    "--permission-prompt-tool",
    "stdio",
)
#: One-shot print mode; ``--verbose`` is mandatory with stream-json output.
PRINT_FLAGS: tuple[str, ...] = ("--output-format", "stream-json", "--verbose")

#: Set by a parent Claude Code; a child that sees it believes it is nested.
_NESTED_MARKERS = ("CLAUDECODE",)


def executable(options: BodyOptions) -> Path:
    """The CLI to run: ``options.executable`` or the pinned install."""
    return options.executable or find_agent("claude")


def session_flags(
    *, model: str | None, permission_mode: str | None, resume: str | None
) -> list[str]:
    """``--model`` / ``--permission-mode`` / ``--resume`` for the values that are set."""
    flags: list[str] = []
    if model:
        flags += ["--model", model]
    if permission_mode:
        flags += ["--permission-mode", permission_mode]
    if resume:
        flags += ["--resume", resume]
    return flags


def spawn_spec(options: BodyOptions, argv: list[str], *, stdin_devnull: bool = False) -> SpawnSpec:
    """A :class:`SpawnSpec` in ``options.cwd`` with the child env minus nesting markers."""
    env = options.child_env()
    for name in _NESTED_MARKERS:
        env.pop(name, None)
    return SpawnSpec(argv=argv, cwd=options.cwd, env=env, stdin_devnull=stdin_devnull)
