"""Render canonical events for a terminal (rich), one line or block per event."""

from __future__ import annotations

import json

from rich.console import Console
from rich.text import Text as RichText

from chorus.events import (
    CompatibilityWarning,
    ControlRequestEvent,
    ControlResponseEvent,
    Event,
    FileChange,
    Handoff,
    JobEnded,
    Notice,
    PermissionDecision,
    PermissionRequest,
    RetryNotice,
    SessionEnded,
    SessionStarted,
    StatusChanged,
    Text,
    TextDelta,
    Thinking,
    ToolCall,
    ToolOutputDelta,
    ToolResult,
    TurnCompleted,
    TurnFailed,
    Unknown,
    UsageUpdate,
    Worktree,
)


def _short(value: object, limit: int = 160) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = text.replace("\n", "⏎ ")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def describe(event: Event) -> RichText | None:
    """A one-line rich description of ``event``; ``None`` for events shown elsewhere."""
    seq = f"[dim]{event.seq:>4}[/dim] "
    match event:
        case SessionStarted():
            tail = f"model={event.model} cwd={event.cwd}"
            return RichText.from_markup(f"{seq}[cyan]session[/cyan] {event.body} {tail}")
        case TextDelta() | ToolOutputDelta() | StatusChanged():
            return None
        case ControlRequestEvent() | ControlResponseEvent():
            return None
        case JobEnded():
            colour = {"succeeded": "green", "cancelled": "yellow"}.get(event.state, "red")
            why = f": {event.error.code}: {_short(event.error.message)}" if event.error else ""
            return RichText.from_markup(f"{seq}[{colour}]job {event.state}[/{colour}]") + RichText(
                why
            )
        case Text():
            return RichText.from_markup(seq + "[bold]assistant[/bold] ") + RichText(event.text)
        case Thinking():
            return RichText.from_markup(seq + "[dim italic]thinking[/dim italic] ") + RichText(
                _short(event.text)
            )
        case ToolCall():
            head = f"{seq}[magenta]tool[/magenta] {event.tool} [dim]({event.native_tool})[/dim] "
            return RichText.from_markup(head) + RichText(_short(event.input))
        case ToolResult():
            colour = "red" if event.is_error else "green"
            head = f"{seq}[{colour}]result[/{colour}] "
            return RichText.from_markup(head) + RichText(_short(event.output or "(no output)"))
        case FileChange():
            return RichText.from_markup(f"{seq}[magenta]file[/magenta] {event.kind} {event.path}")
        case PermissionRequest():
            head = f"{seq}[yellow]permission?[/yellow] {event.tool} "
            return RichText.from_markup(head) + RichText(_short(event.input))
        case PermissionDecision():
            colour = "green" if event.decision == "allow" else "red"
            why = f" — {event.reason}" if event.reason else ""
            return RichText.from_markup(f"{seq}[{colour}]{event.decision}[/{colour}]") + RichText(
                why
            )
        case RetryNotice():
            return RichText.from_markup(
                f"{seq}[yellow]retry[/yellow] attempt {event.attempt}: {event.error.code}"
            )
        case UsageUpdate():
            return RichText.from_markup(
                f"{seq}[dim]usage in={event.usage.input_tokens}"
                f" out={event.usage.output_tokens}[/dim]"
            )
        case TurnCompleted():
            cost = f" ${event.cost_usd:.4f}" if event.cost_usd is not None else ""
            done = event.usage
            tokens = f" in={done.input_tokens} out={done.output_tokens}" if done else ""
            return RichText.from_markup(f"{seq}[bold green]done[/bold green]{tokens}{cost}")
        case TurnFailed():
            return RichText.from_markup(
                f"{seq}[bold red]failed[/bold red] {event.error.code}: "
            ) + RichText(_short(event.error.message))
        case Notice() | CompatibilityWarning():
            return RichText.from_markup(f"{seq}[yellow]note[/yellow] ") + RichText(event.message)
        case Handoff():
            return RichText.from_markup(
                f"{seq}[bold yellow]handoff[/bold yellow] {event.from_body} → {event.to_body}"
                f" ({event.reason.code})"
            )
        case Worktree():
            line = f"{event.action} {event.path}" + (f" ({event.branch})" if event.branch else "")
            detail = f": {event.detail}" if event.detail else ""
            return RichText.from_markup(f"{seq}[cyan]worktree[/cyan] ") + RichText(line + detail)
        case SessionEnded():
            return RichText.from_markup(f"{seq}[dim]session ended: {event.reason}[/dim]")
        case Unknown():
            return RichText.from_markup(f"{seq}[dim]unknown {event.native_type}[/dim]")
        case _:
            return RichText.from_markup(f"{seq}[dim]{event.type}[/dim]")


def print_event(console: Console, event: Event) -> None:
    line = describe(event)
    if line is not None:
        console.print(line, highlight=False)
