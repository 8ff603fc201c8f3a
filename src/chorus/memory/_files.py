"""The memory files, which are the truth (the SQLite index is rebuilt from them).

Layout under ``CHORUS_HOME/memory/``::

    MEMORY.md              long-term notes, always in context
    daily/YYYY-MM-DD.md    daily notes (the last few days in context)
    items/<id>.md          one typed item: a header of ``key: value`` lines
                           between ``---`` lines, then the text
    index.db               the search index (owned by this package)

Parsing never raises on bad content: it returns what it could read plus
warnings that name the file and line, so one hand-edited file cannot hide the
rest of the memory.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chorus.config import chorus_home
from chorus.memory._model import ITEM_KINDS, ITEM_STATUSES, SOURCE_KINDS, MemoryItem

_DAY_RE = re.compile(r"(\d{4}-\d{2}-\d{2})\.md")
_ID_RE = re.compile(r"m[0-9a-f]{6,32}")


@dataclass(frozen=True, slots=True)
class Layout:
    """Paths of one memory folder."""

    root: Path

    @classmethod
    def default(cls) -> Layout:
        return cls(chorus_home() / "memory")

    @property
    def memory_md(self) -> Path:
        return self.root / "MEMORY.md"

    @property
    def daily(self) -> Path:
        return self.root / "daily"

    @property
    def items(self) -> Path:
        return self.root / "items"

    @property
    def index(self) -> Path:
        return self.root / "index.db"

    def item_path(self, item_id: str) -> Path:
        return self.items / f"{item_id}.md"

    def day_path(self, day: dt.date) -> Path:
        return self.daily / f"{day.isoformat()}.md"

    def ensure(self) -> None:
        for path in (self.root, self.daily, self.items):
            path.mkdir(parents=True, exist_ok=True, mode=0o700)


def is_item_id(value: str) -> bool:
    return bool(_ID_RE.fullmatch(value))


def write_atomic(path: Path, text: str) -> None:
    """Write via a temporary file and a rename: a reader sees the old or the new file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_lines(path: Path) -> tuple[list[str], list[str]]:
    """The file's lines; a line that is not UTF-8 is dropped with a warning."""
    warnings: list[str] = []
    lines: list[str] = []
    try:
        raw = path.read_bytes()
    except OSError as exc:
        return [], [f"{path}: cannot read ({exc.strerror})"]
    for n, chunk in enumerate(raw.split(b"\n"), start=1):
        try:
            text = chunk.decode("utf-8")
        except UnicodeDecodeError:
            warnings.append(f"{path}:{n}: not UTF-8 text; line skipped")
            continue
        if "\x00" in text:
            warnings.append(f"{path}:{n}: contains NUL bytes; line skipped")
            continue
        lines.append(text.rstrip("\r"))
    return lines, warnings


def day_of(path: Path) -> dt.date | None:
    match = _DAY_RE.fullmatch(path.name)
    if not match:
        return None
    try:
        return dt.date.fromisoformat(match.group(1))
    except ValueError:
        return None


# -- items -------------------------------------------------------------------------

_FLOAT_KEYS = ("importance", "created", "last_seen")
_INT_KEYS = ("reinforcement",)
_TEXT_KEYS = ("id", "kind", "status", "source_kind", "source_event", "session_id")
_REF_KEYS = ("supersedes", "superseded_by")
_CHOICES = {"kind": ITEM_KINDS, "status": ITEM_STATUSES, "source_kind": SOURCE_KINDS}


def render_item(item: MemoryItem) -> str:
    """The item's file text (inverse of :func:`parse_item`)."""
    lines = ["---"]
    for key in (*_TEXT_KEYS, "importance", "reinforcement", "created", "last_seen", *_REF_KEYS):
        value = getattr(item, key)
        if value is not None:
            lines.append(f"{key}: {_iso(value) if key in ('created', 'last_seen') else value}")
    lines += ["---", item.text, ""]
    return "\n".join(lines)


def parse_item(path: Path) -> tuple[MemoryItem | None, list[str]]:
    """Read an item file. A bad header value is a warning (the default is used); a
    file without a header or text is skipped with a warning."""
    lines, warnings = read_lines(path)
    if not lines or lines[0].strip() != "---" or "---" not in [x.strip() for x in lines[1:]]:
        return None, [*warnings, f"{path}:1: no '---' header; item skipped"]
    end = 1 + [x.strip() for x in lines[1:]].index("---")
    fields: dict[str, Any] = {}
    for n, line in enumerate(lines[1:end], start=2):
        problem = _header_field(line, fields)
        if problem:
            warnings.append(f"{path}:{n}: {problem}")
    text = "\n".join(lines[end + 1 :]).strip()
    fields.setdefault("id", path.stem)
    if not text or "kind" not in fields:
        what = "no text" if not text else "no valid kind"
        return None, [*warnings, f"{path}:1: {what}; item skipped"]
    return MemoryItem(text=text, **fields), warnings


def _header_field(line: str, fields: dict[str, Any]) -> str | None:
    """Parse one ``key: value`` line into ``fields``; return a problem or None."""
    if not line.strip():
        return None
    key, sep, raw = line.partition(":")
    key, raw = key.strip(), raw.strip()
    if not sep:
        return f"not a 'key: value' line: {line[:60]!r}"
    try:
        fields[key] = _header_value(key, raw)
    except ValueError as exc:
        return f"{key}: {exc}"
    return None


def _header_value(key: str, raw: str) -> Any:
    if key in _CHOICES:
        if raw not in _CHOICES[key]:
            raise ValueError(f"{raw!r} is not one of {', '.join(_CHOICES[key])}")
        return raw
    if key in _TEXT_KEYS or key in _REF_KEYS:
        return raw or None
    if key in _INT_KEYS:
        return max(1, int(raw))
    if key == "importance":
        value = float(raw)
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"{raw} is outside 0..1")
        return value
    if key in _FLOAT_KEYS:
        return _epoch(raw)
    raise ValueError("unknown key")


def _iso(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, dt.UTC).isoformat(timespec="seconds")


def _epoch(raw: str) -> float:
    try:
        return dt.datetime.fromisoformat(raw).timestamp()
    except ValueError:
        return float(raw)


# -- notes ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Chunk:
    """A piece of a note file for the index: a paragraph or a heading's section."""

    path: Path
    line: int
    text: str


def chunk_note(path: Path, lines: list[str], max_chars: int = 1200) -> list[Chunk]:
    """Split a note into paragraphs (blank-line separated), long ones cut at
    ``max_chars``; each chunk keeps its first line number."""
    chunks: list[Chunk] = []
    start, buf = 0, list[str]()
    for n, line in enumerate([*lines, ""], start=1):
        if line.strip():
            if not buf:
                start = n
            buf.append(line)
            if sum(len(x) + 1 for x in buf) < max_chars:
                continue
        if buf:
            chunks.append(Chunk(path, start, "\n".join(buf).strip()))
            buf = []
    return chunks


def append_daily(layout: Layout, text: str, when: dt.datetime) -> Path:
    """Append a timestamped bullet to the day's note (created with a heading)."""
    path = layout.day_path(when.date())
    layout.ensure()
    head = "" if path.exists() else f"# {when.date().isoformat()}\n\n"
    with path.open("a", encoding="utf-8") as handle:
        handle.write(f"{head}- {when.strftime('%H:%M')} {text.strip()}\n")
    return path


def daily_files(layout: Layout) -> list[tuple[dt.date, Path]]:
    """Daily notes with a valid ``YYYY-MM-DD.md`` name, oldest first."""
    if not layout.daily.is_dir():
        return []
    out = [(day, p) for p in layout.daily.iterdir() if (day := day_of(p)) is not None]
    return sorted(out)
