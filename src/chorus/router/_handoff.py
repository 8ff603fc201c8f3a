"""The handoff bundle: everything the next body needs to continue a job.

Built from the job's canonical events (the log is the source of truth, not a
body's memory) and the working directory; rendered as the first prompt of the
next body. The history is trimmed from the oldest end to a token budget
(estimated at four characters a token).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from chorus.events import (
    ErrorInfo,
    Event,
    FileChange,
    Plan,
    Queued,
    Steer,
    Text,
    ToolCall,
    ToolResult,
    TurnCompleted,
    TurnFailed,
)

_CHARS_PER_TOKEN = 4
_REDIRECT = re.compile(r"(?:>>?|\btee\s+(?:-a\s+)?)\s*([^\s;&|<>]+)")


class WorktreeLike(Protocol):
    """Where the job works (a ``chorus.store.WorktreeRecord`` fits)."""

    @property
    def path(self) -> str: ...
    @property
    def branch(self) -> str: ...


@dataclass(frozen=True, slots=True)
class Step:
    tool: str
    summary: str
    result: str
    ok: bool


@dataclass(frozen=True, slots=True)
class TouchedFile:
    path: str
    exists: bool
    lines: int | None
    change: str


@dataclass(frozen=True, slots=True)
class HandoffBundle:
    task: str
    from_body: str
    failure: ErrorInfo
    plan: list[str] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    results: list[str] = field(default_factory=list)
    history: list[str] = field(default_factory=list)
    files: list[TouchedFile] = field(default_factory=list)
    resume_note: str = ""
    #: The job's git worktree and branch, when it has one.
    worktree: str | None = None
    branch: str | None = None

    def render(self) -> str:
        """The prompt for the next body."""
        parts = [
            "You are taking over a task that another coding agent started "
            f"({self.from_body}); it stopped because: {self.failure.code}: "
            f"{self.failure.message}",
            f"## Original task\n{self.task}",
        ]
        if self.worktree:
            parts.append(
                f"## Where to work\nThe git worktree {self.worktree} on branch {self.branch}: "
                "stay in it and commit there; never touch another checkout."
            )
        if self.plan:
            parts.append("## Plan\n" + "\n".join(f"- {p}" for p in self.plan))
        if self.steps:
            lines = [f"- [{'ok' if s.ok else 'failed'}] {s.tool}: {s.summary}" for s in self.steps]
            parts.append("## Completed steps\n" + "\n".join(lines))
        if self.files:
            lines = [
                f"- {f.path}: {f.change}"
                + (f", now {f.lines} lines" if f.exists and f.lines is not None else "")
                + ("" if f.exists else " (missing now)")
                for f in self.files
            ]
            parts.append("## Files touched (already on disk; do not redo)\n" + "\n".join(lines))
        if self.results:
            parts.append("## Intermediate results\n" + "\n".join(f"- {r}" for r in self.results))
        if self.history:
            parts.append("## Conversation so far (trimmed)\n" + "\n".join(self.history))
        parts.append(f"## Resume note\n{self.resume_note}")
        return "\n\n".join(parts)


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _paths_of(call: ToolCall) -> list[str]:
    found = [
        str(call.input[k])
        for k in ("file_path", "path", "filename", "notebook_path")
        if isinstance(call.input.get(k), str)
    ]
    if call.tool == "shell":
        command = str(call.input.get("command") or call.input.get("cmd") or "")
        found += [m for m in _REDIRECT.findall(command) if not m.startswith("/dev/")]
    return found


def _steps(events: Sequence[Event]) -> list[Step]:
    calls = {e.call_id: e for e in events if isinstance(e, ToolCall)}
    steps = []
    for result in (e for e in events if isinstance(e, ToolResult)):
        call = calls.get(result.call_id)
        if call is not None:
            summary = _clip(str(call.input.get("command") or call.input or call.title), 160)
            steps.append(Step(call.tool, summary, _clip(result.output, 200), not result.is_error))
    return steps


def _touched(events: Sequence[Event], cwd: Path) -> list[TouchedFile]:
    changes: dict[str, str] = {}
    for event in events:
        if isinstance(event, FileChange):
            changes[event.path] = event.kind
        elif isinstance(event, ToolCall):
            for touched in _paths_of(event):
                changes.setdefault(touched, event.tool)
    out = []
    for raw, change in changes.items():
        path = Path(raw) if Path(raw).is_absolute() else cwd / raw
        try:
            lines: int | None = len(path.read_text(errors="replace").splitlines())
            exists = True
        except OSError:
            lines, exists = None, path.exists()
        out.append(TouchedFile(raw, exists, lines, change))
    return out


def _history(events: Sequence[Event], budget_chars: int) -> list[str]:
    lines: list[str] = []
    for event in events:
        if isinstance(event, Text):
            lines.append(f"assistant: {_clip(event.text, 400)}")
        elif isinstance(event, ToolCall):
            lines.append(f"tool {event.tool}: {_clip(str(event.input), 200)}")
        elif isinstance(event, ToolResult):
            lines.append(f"result: {_clip(event.output, 200)}")
    kept: list[str] = []
    used = 0
    for line in reversed(lines):  # the most recent history matters most
        if used + len(line) > budget_chars:
            kept.append("… (earlier history trimmed)")
            break
        kept.append(line)
        used += len(line)
    return list(reversed(kept))


def build_bundle(
    *,
    task: str,
    from_body: str,
    failure: ErrorInfo,
    events: Sequence[Event],
    cwd: Path,
    token_budget: int = 4000,
    worktree: WorktreeLike | None = None,
) -> HandoffBundle:
    """Assemble the bundle from the job's events and the files on disk now."""
    plans = [e for e in events if isinstance(e, Plan)]
    plan = [f"[{p.status}] {p.content}" for p in plans[-1].entries] if plans else []
    texts = [_clip(e.text, 300) for e in events if isinstance(e, Text)]
    return HandoffBundle(
        task=task,
        from_body=from_body,
        failure=failure,
        plan=plan,
        steps=_steps(events),
        results=texts[-5:],
        history=_history(events, token_budget * _CHARS_PER_TOKEN),
        files=_touched(events, cwd),
        worktree=worktree.path if worktree is not None else None,
        branch=worktree.branch if worktree is not None else None,
        resume_note=(
            "Continue the original task from where it stopped. Check the files listed "
            "above instead of recreating them, do only the remaining work, then report."
        ),
    )


_TRANSCRIPT_HEAD = (
    "[Chorus] This conversation continues an earlier session whose native history "
    "could not be restored. Its transcript, rebuilt from Chorus's log (oldest first, "
    "trimmed to fit), follows; treat it as what was said and done so far."
)
_TRANSCRIPT_TAIL = "[End of transcript. The new message follows.]"


def _turn_lines(turn: Sequence[Event], prompt: str | None) -> list[str]:
    """One turn of the log as transcript lines: the user's prompt (when known), what
    was said and done, and the answer (the turn's result when no text was logged)."""
    lines = [f"user: {_clip(prompt, 2000)}"] if prompt else []
    said = False
    for event in turn:
        if isinstance(event, Text) and event.text.strip():
            lines.append(f"assistant: {_clip(event.text, 2000)}")
            said = True
        elif isinstance(event, Steer | Queued):
            lines.append(f"user: {_clip(event.text, 2000)}")
        elif isinstance(event, ToolCall):
            lines.append(f"tool {event.tool}: {_clip(str(event.input), 300)}")
        elif isinstance(event, ToolResult):
            lines.append(f"result: {_clip(event.output, 300)}")
        elif isinstance(event, TurnCompleted) and event.result and not said:
            lines.append(f"assistant: {_clip(event.result, 2000)}")
    return lines


def _turns(events: Sequence[Event]) -> list[list[Event]]:
    turns: list[list[Event]] = [[]]
    for event in events:
        turns[-1].append(event)
        if isinstance(event, TurnCompleted | TurnFailed):
            turns.append([])
    return [turn for turn in turns if turn]


def transcript_bundle(
    events: Sequence[Event],
    budget_chars: int,
    *,
    prompts: Mapping[str, str] | None = None,
) -> str | None:
    """The conversation in ``events`` (a session's log) as text a fresh body can read
    first, newest turns kept within ``budget_chars``; ``None`` when nothing was said.

    ``prompts`` maps a job id to its prompt (the log has no event for the user's
    turn); each job's prompt heads its first turn.
    """
    prompts = prompts or {}
    lines: list[str] = []
    seen_jobs: set[str] = set()
    for turn in _turns(events):
        job = next((e.job_id for e in turn if e.job_id), None)
        prompt = prompts.get(job) if job and job not in seen_jobs else None
        if job:
            seen_jobs.add(job)
        lines += _turn_lines(turn, prompt)
    if not lines:
        return None
    room = budget_chars - len(_TRANSCRIPT_HEAD) - len(_TRANSCRIPT_TAIL) - 4
    kept = _newest_within(lines, room)
    return "\n\n".join([_TRANSCRIPT_HEAD, "\n".join(kept), _TRANSCRIPT_TAIL])


def _newest_within(lines: list[str], room: int) -> list[str]:
    kept: list[str] = []
    used = 0
    for line in reversed(lines):
        if used + len(line) + 1 > room:
            kept.append("… (earlier turns trimmed)")
            break
        kept.append(line)
        used += len(line) + 1
    return list(reversed(kept))
