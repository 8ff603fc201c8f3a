"""The client file system an ACP agent may use: only inside the session's roots.

An agent that asks ``fs/read_text_file`` or ``fs/write_text_file`` gets an answer
only for paths that, after resolving ``..`` and following every symlink, lie
inside one of the roots (the session's cwd plus any extra roots). Anything else
is refused with :class:`FsAccessError`, which the body sends back as a JSON-RPC
error. Blocking file I/O: callers on an event loop run these in a thread.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from chorus.bodies.acp._errors import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    RESOURCE_NOT_FOUND,
    FsAccessError,
)

#: Largest file served to an agent; its reply is one JSON line on its stdin.
MAX_READ_BYTES = 4 << 20


@dataclass(frozen=True, slots=True)
class FileRoots:
    """Resolved directories an agent may read and write under."""

    roots: tuple[Path, ...]

    @classmethod
    def of(cls, cwd: Path, extra: Iterable[Path | str] = ()) -> FileRoots:
        """Roots for a session in ``cwd`` plus ``extra`` (each resolved once, now)."""
        paths = [Path(cwd), *(Path(p) for p in extra)]
        return cls(tuple(dict.fromkeys(p.expanduser().resolve() for p in paths)))

    def check(self, raw: str) -> Path:
        """The resolved path for ``raw`` if it is inside a root; else :class:`FsAccessError`."""
        if not raw or "\x00" in raw:
            raise FsAccessError(INVALID_PARAMS, "path is empty or contains NUL", path=raw)
        path = Path(raw)
        if not path.is_absolute():
            raise FsAccessError(INVALID_PARAMS, "path must be absolute", path=raw)
        try:
            resolved = path.resolve()
        except (OSError, RuntimeError) as exc:  # symlink loop
            raise FsAccessError(INVALID_PARAMS, f"cannot resolve path: {exc}", path=raw) from exc
        if not any(resolved.is_relative_to(root) for root in self.roots):
            raise FsAccessError(
                INVALID_PARAMS,
                "Chorus policy: the path is outside the session's allowed roots; refused",
                path=raw,
            )
        return resolved

    def read_text(
        self,
        raw: str,
        *,
        line: int | None = None,
        limit: int | None = None,
        missing_as_empty: bool = False,
    ) -> str:
        """Text of the file at ``raw``; ``line`` (1-based) and ``limit`` select lines."""
        path = self.check(raw)
        try:
            if path.stat().st_size > MAX_READ_BYTES:
                raise FsAccessError(INTERNAL_ERROR, "file too large to serve", path=raw)
            text = path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError as exc:
            if missing_as_empty:
                return ""
            raise FsAccessError(RESOURCE_NOT_FOUND, "Resource not found", path=raw) from exc
        except OSError as exc:
            raise FsAccessError(INTERNAL_ERROR, f"cannot read file: {exc}", path=raw) from exc
        return _select_lines(text, line, limit)

    def write_text(self, raw: str, content: str) -> None:
        """Create or replace the file at ``raw`` (parents created inside the root)."""
        path = self.check(raw)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content, encoding="utf-8")
        except OSError as exc:
            raise FsAccessError(INTERNAL_ERROR, f"cannot write file: {exc}", path=raw) from exc


def _select_lines(text: str, line: int | None, limit: int | None) -> str:
    if line is None and limit is None:
        return text
    lines = text.split("\n")
    start = max((line or 1) - 1, 0)
    end = len(lines) if limit is None else start + limit
    return "\n".join(lines[start:end])
