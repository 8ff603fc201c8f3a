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

No link is ever expected here: every file is read and appended to without
following a symbolic link (``O_NOFOLLOW``), and only a regular file is read, so a
link planted in ``memory/`` cannot put another file (a token, a key) into a
context, and a FIFO cannot stall a reader.
"""

from __future__ import annotations

import datetime as dt
import errno
import os
import re
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chorus.config import chorus_home
from chorus.memory._model import (
    ITEM_KINDS,
    ITEM_STATUSES,
    SOURCE_KINDS,
    MemoryInputError,
    MemoryItem,
)

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


_NO_FOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC


def read_regular(
    path: Path, limit: int = -1, *, single_link: bool = False, no_links: bool = False
) -> bytes:
    """The bytes (at most ``limit``) of the regular file at ``path``, opened without
    following a symbolic link and without blocking. A link, a folder, a FIFO or a
    device raises :class:`OSError` whose ``strerror`` says which. ``single_link``
    also refuses a file with other hard links (maybe another name of a secret);
    ``no_links`` refuses a link anywhere in the (absolute) path: each folder is
    opened in turn without following one, so a folder swapped for a link between a
    check of the path and this read is refused too."""
    try:
        fd = _open_walk(path) if no_links else _open_last(path, None)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise OSError(exc.errno, "a symbolic link is in the way (not followed)") from None
        raise
    try:
        _check_regular(os.fstat(fd), single_link)
    except OSError:
        os.close(fd)
        raise
    with os.fdopen(fd, "rb") as handle:
        return handle.read(limit)


def _check_regular(info: os.stat_result, single_link: bool) -> None:
    if not stat.S_ISREG(info.st_mode):
        raise OSError(errno.EINVAL, "not a regular file")
    if single_link and info.st_nlink > 1:
        raise OSError(errno.EMLINK, f"the file has {info.st_nlink} hard links")


def _open_last(name: str | Path, dir_fd: int | None) -> int:
    return os.open(name, os.O_RDONLY | os.O_NONBLOCK | _NO_FOLLOW, dir_fd=dir_fd)


def _open_folder(name: str, dir_fd: int) -> int:
    """The folder ``name`` in ``dir_fd``; a link there (Linux says ENOTDIR) is ELOOP."""
    try:
        return os.open(name, os.O_RDONLY | os.O_DIRECTORY | _NO_FOLLOW, dir_fd=dir_fd)
    except NotADirectoryError:
        raise OSError(errno.ELOOP, f"{name!r} is not a folder") from None


def _open_walk(path: Path) -> int:
    if not path.is_absolute():
        raise OSError(errno.EINVAL, "not an absolute path")
    folder = os.open(path.anchor, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in path.parts[1:-1]:
            inner = _open_folder(part, folder)
            os.close(folder)
            folder = inner
        return _open_last(path.name, folder)
    finally:
        os.close(folder)


def read_lines(path: Path) -> tuple[list[str], list[str]]:
    """The file's lines; a line that is not UTF-8 is dropped with a warning. A link
    or a special file is not read (a warning says so)."""
    warnings: list[str] = []
    lines: list[str] = []
    try:
        raw = read_regular(path)
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
_TEXT_KEYS = ("id", "kind", "status", "source_kind", "source_event", "session_id", "job_id", "body")
_REF_KEYS = ("supersedes", "superseded_by")
_CHOICES = {"kind": ITEM_KINDS, "status": ITEM_STATUSES, "source_kind": SOURCE_KINDS}


def render_item(item: MemoryItem) -> str:
    """The item's file text (inverse of :func:`parse_item`)."""
    lines = ["---"]
    for key in (*_TEXT_KEYS, "importance", "reinforcement", "created", "last_seen", *_REF_KEYS):
        value = getattr(item, key)
        if value is not None:
            shown = _iso(value) if key in ("created", "last_seen") else _one_line(value)
            lines.append(f"{key}: {shown}")
    lines += ["---", item.text, ""]
    return "\n".join(lines)


def _one_line(value: object) -> str:
    """A header value on one line: a line break in a value (an id a caller made up)
    must not add a header line of its own (``source_kind: user``)."""
    return " ".join(str(value).splitlines()).strip()


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
    head = "" if os.path.lexists(path) else f"# {when.date().isoformat()}\n\n"
    with os.fdopen(_open_append(path), "a", encoding="utf-8") as handle:
        handle.write(f"{head}- {when.strftime('%H:%M')} {text.strip()}\n")
    return path


def _open_append(path: Path) -> int:
    """A descriptor appending to the regular file ``path`` (made if missing), never
    through a link: a link or special file there is a :class:`MemoryInputError`."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | _NO_FOLLOW
    try:
        fd = os.open(path, flags, 0o600)
    except OSError as exc:
        why = "it is a symbolic link" if exc.errno == errno.ELOOP else exc.strerror
        raise MemoryInputError(f"cannot append to {path}: {why}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise MemoryInputError(f"cannot append to {path}: not a regular file")
    return fd


def daily_files(layout: Layout) -> list[tuple[dt.date, Path]]:
    """Daily notes with a valid ``YYYY-MM-DD.md`` name, oldest first."""
    if not layout.daily.is_dir():
        return []
    out = [(day, p) for p in layout.daily.iterdir() if (day := day_of(p)) is not None]
    return sorted(out)
