"""Context assembly: what every body knows before it starts, the same for all.

Sections, in this order: identity (``SOUL.md``), date and time, OS and cwd, the
cached system spec, ``MEMORY.md``, the recent daily notes, the memory items most
relevant to the task, the project's ``CHORUS.md`` files, the active plan.

Budget: about 4 characters a token. When the whole is over budget, sections are
trimmed in :data:`TRIM_ORDER` until it fits: the oldest daily notes go first,
then the least relevant items, the system spec, then MEMORY.md, the project
files, the identity and the plan are cut from their end. Every trim leaves a
visible ``[chorus: ...]`` line in its section and a note in
:attr:`Context.notes`; nothing is dropped silently.

Nothing a body may have written is carried across its sandbox: project files and
their imports are read only where the job's policy lets the body read
(:mod:`chorus.context._project`), ``SOUL.md`` and the memory files are read
without following links, and a memory item a model wrote is quoted as data with
who wrote it (:func:`chorus.memory.item_line`). A refusal is a visible line and a
note, never the refused content.
"""

from __future__ import annotations

import datetime as dt
import math
import platform
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from chorus.context._project import ProjectContext, load_project
from chorus.context._system import load_soul, render_spec, system_spec
from chorus.memory import Hit, Memory, MemorySettings, item_line
from chorus.policy import Policy, load_policy, policy_path

#: Sections trimmed first come first.
TRIM_ORDER = ("daily", "items", "system", "memory_md", "project", "identity", "plan")
#: How each trimmable section shrinks: drop its oldest part, its last (least
#: relevant) part, the whole section, or cut its text from the end.
TrimMode = Literal["drop_first", "drop_last", "drop_all", "cut"]
_MODES: dict[str, TrimMode] = {
    "daily": "drop_first",
    "items": "drop_last",
    "system": "drop_all",
}
_MIN_CUT_CHARS = 200


def tokens(text: str) -> int:
    """The token estimate used for the budget (about 4 characters a token)."""
    return math.ceil(len(text) / 4)


@dataclass(slots=True)
class Part:
    text: str
    label: str | None = None


@dataclass(slots=True)
class Section:
    name: str
    title: str
    parts: list[Part]
    trimmed: list[str] = field(default_factory=list)
    dropped: int = 0

    def render(self) -> str:
        body = [f"### {p.label}\n{p.text}" if p.label else p.text for p in self.parts]
        notes = [f"[chorus: {note}]" for note in self.trimmed]
        return "\n\n".join([f"## {self.title}", *body, *notes])

    @property
    def empty(self) -> bool:
        """Nothing to show: no content and no trim note (a trimmed-away section
        still shows its title and what was trimmed)."""
        return not self.trimmed and not self.has_content

    @property
    def has_content(self) -> bool:
        return any(p.text.strip() for p in self.parts)


@dataclass(slots=True)
class Context:
    """The assembled context. :attr:`text` is exactly what a body receives."""

    sections: list[Section]
    budget: int
    notes: list[str] = field(default_factory=list)
    items: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        head = (
            "# Context from Chorus\n\nChorus assembled this before the session started: "
            "who you are, where you run, and what you remember. Chorus's own tools "
            "(memory_search, memory_write, notify_user) are on its MCP server `chorus`."
        )
        return "\n\n".join([head, *(s.render() for s in self.sections if not s.empty)]) + "\n"

    @property
    def tokens(self) -> int:
        return tokens(self.text)

    def to_dict(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "tokens": self.tokens,
            "budget": self.budget,
            "sections": [
                {"name": s.name, "tokens": tokens(s.render()), "trimmed": s.trimmed}
                for s in self.sections
                if not s.empty
            ],
            "items": self.items,
            "notes": self.notes,
        }


def assemble(
    cwd: Path,
    task: str = "",
    *,
    memory: Memory | None = None,
    settings: MemorySettings | None = None,
    plan: str | None = None,
    now: dt.datetime | None = None,
    policy: Policy | None = None,
) -> Context:
    """Build the context for a body starting in ``cwd`` on ``task``. ``policy`` says
    what the job may read (by default ``CHORUS_HOME/policy.toml``, as the daemon's)."""
    own = memory is None
    mem = memory or Memory(settings=settings)
    try:
        project = load_project(cwd, policy or current_policy())
        return _assemble(mem, cwd, task, plan, now or dt.datetime.now().astimezone(), project)
    finally:
        if own:
            mem.close()


def current_policy() -> Policy:
    """``CHORUS_HOME/policy.toml`` as it is now: parsed again only when the file
    changed (its inode, size, mode or modification time), not at every body start."""
    path = policy_path()
    try:
        info = path.stat()
    except OSError:
        return load_policy(path)
    key = (str(path), info.st_ino, info.st_size, info.st_mode, info.st_mtime_ns)
    if _POLICY and _POLICY[0][0] == key:
        return _POLICY[0][1]
    policy = load_policy(path)
    _POLICY[:] = [(key, policy)]
    return policy


_POLICY: list[tuple[tuple[str, int, int, int, int], Policy]] = []


def _assemble(
    mem: Memory,
    cwd: Path,
    task: str,
    plan: str | None,
    now: dt.datetime,
    project: ProjectContext,
) -> Context:
    cfg = mem.settings
    ctx = Context([], cfg.context_tokens)
    soul_path, identity, soul_notes = load_soul()
    md_text, md_warnings = mem.memory_md()
    chosen = _relevant(mem, task, cfg.top_n, now)
    ctx.items = [h.ref for h in chosen]
    ctx.sections = [
        Section("identity", f"Identity ({soul_path.name})", [Part(identity)]),
        Section("time", "Now", [Part(_now(now))]),
        Section("environment", "Environment", [Part(_environment(cwd, project.root))]),
        Section("system", "System (cached)", [Part(render_spec(system_spec()))]),
        Section("memory_md", "Long-term memory (MEMORY.md)", _md_parts(md_text, md_warnings)),
        Section("daily", "Recent daily notes", _daily(mem, cfg.daily_days, now.date())),
        Section("items", "Relevant memory", [Part(_hit_line(h)) for h in chosen]),
        Section("project", "Project context (CHORUS.md)", _project_parts(project)),
        Section("plan", "Plan of the active job", [Part(plan or "")]),
    ]
    ctx.notes += [*soul_notes, *md_warnings, *mem.warnings, *project.refused]
    fit(ctx)
    return ctx


def _now(now: dt.datetime) -> str:
    return f"{now.strftime('%A %Y-%m-%d %H:%M')} ({now.tzname() or 'local time'})"


def _environment(cwd: Path, root: Path) -> str:
    system = f"{platform.system()} {platform.release()} ({platform.machine()})"
    return f"OS: {system}\nWorking directory: {cwd}\nProject root: {root}"


def _md_parts(text: str, warnings: list[str]) -> list[Part]:
    """MEMORY.md's text; when none could be read, why (a link there is not followed)."""
    return [Part(text)] if text else [Part(f"[chorus: {w}]") for w in warnings]


def _daily(mem: Memory, days: int, today: dt.date) -> list[Part]:
    return [Part(text, day.isoformat()) for day, text in mem.recent_notes(days, today) if text]


def _relevant(mem: Memory, task: str, top_n: int, now: dt.datetime) -> list[Hit]:
    """The top items for the task; when search finds fewer than ``top_n``, the most
    recently seen active items fill the rest (a small memory is shown whole)."""
    if top_n <= 0:
        return []
    hits = [h for h in mem.search(task, limit=top_n * 2) if h.source == "item"][:top_n]
    seen = {h.ref for h in hits}
    for item in mem.items(limit=top_n):
        if len(hits) >= top_n:
            break
        if f"item:{item.id}" not in seen:
            hits.append(Hit(f"item:{item.id}", "item", item.text, 0.0, item=item))
    return hits


def _hit_line(hit: Hit) -> str:
    return f"- {hit.text}" if hit.item is None else item_line(hit.item)


def _project_parts(project: ProjectContext) -> list[Part]:
    root = project.root
    return [Part(text.strip(), str(path.relative_to(root))) for path, text in project.files]


# -- the budget --------------------------------------------------------------------------


def fit(ctx: Context) -> None:
    """Trim sections in :data:`TRIM_ORDER` until the context fits its budget."""
    by_name = {s.name: s for s in ctx.sections}
    for name in TRIM_ORDER:
        section = by_name[name]
        while ctx.tokens > ctx.budget and section.has_content:
            _trim(section, _excess_chars(ctx), _MODES.get(name, "cut"))
        ctx.notes += [f"{section.title}: {note}" for note in section.trimmed]
        if ctx.tokens <= ctx.budget:
            return


def _excess_chars(ctx: Context) -> int:
    return (ctx.tokens - ctx.budget) * 4


def _trim(section: Section, excess: int, mode: TrimMode) -> None:
    """Shrink ``section`` one step and note (visibly) what was done."""
    if mode == "drop_first":
        note = f"dropped {section.parts.pop(0).label or 'a part'} to fit the token budget"
    elif mode == "drop_last":
        section.parts.pop()
        section.dropped += 1
        note = f"dropped the {section.dropped} least relevant item(s) to fit the token budget"
        if section.dropped > 1:
            section.trimmed.pop()
    elif mode == "drop_all":
        section.parts.clear()
        note = "left out to fit the token budget"
    else:
        note = _cut(section, excess)
    section.trimmed.append(note)


def _cut(section: Section, excess: int) -> str:
    whole = "\n\n".join(p.text for p in section.parts)
    keep = len(whole) - excess - 120  # room for the note itself
    if keep < _MIN_CUT_CHARS:
        section.parts.clear()
        return f"left out ({len(whole)} characters) to fit the token budget"
    section.parts = [Part(whole[:keep].rstrip())]
    return f"cut from {len(whole)} to {keep} characters to fit the token budget"
