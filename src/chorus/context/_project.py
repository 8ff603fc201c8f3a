"""Project context files: ``CHORUS.md`` from the git root down to the cwd.

A line that is only ``@path`` imports that file in its place (the path is
relative to the importing file). Imports are confined to the project root (the
git root, or the cwd outside a repository): one that resolves outside it, a
cycle, a missing file or more than :data:`MAX_DEPTH` levels is refused, logged,
and left as a visible ``[chorus: ...]`` line naming the path, never its content.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger("chorus.context")

FILE_NAME = "CHORUS.md"
MAX_DEPTH = 5
MAX_FILE_BYTES = 256 * 1024
_IMPORT_RE = re.compile(r"^\s*@(\S+)\s*$")


@dataclass(slots=True)
class ProjectContext:
    """The expanded files (root first) and what was refused."""

    root: Path
    files: list[tuple[Path, str]] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)


def project_root(cwd: Path) -> Path:
    """The nearest folder at or above ``cwd`` holding ``.git``; ``cwd`` if none."""
    cwd = cwd.resolve()
    for folder in (cwd, *cwd.parents):
        if (folder / ".git").exists():
            return folder
    return cwd


def load_project(cwd: Path) -> ProjectContext:
    """Every ``CHORUS.md`` from the root down to ``cwd``, imports expanded."""
    cwd = cwd.resolve()
    root = project_root(cwd)
    ctx = ProjectContext(root)
    chain = [root, *reversed([p for p in cwd.parents if p.is_relative_to(root) and p != root])]
    for folder in dict.fromkeys([*chain, cwd]):
        path = folder / FILE_NAME
        if path.is_file():
            ctx.files.append((path, _expand(path, root, ctx, stack=(path.resolve(),))))
    return ctx


def _expand(path: Path, root: Path, ctx: ProjectContext, stack: tuple[Path, ...]) -> str:
    text = _read(path, ctx)
    out = []
    for n, line in enumerate(text.split("\n"), start=1):
        match = _IMPORT_RE.match(line)
        out.append(_import(match.group(1), path, n, root, ctx, stack) if match else line)
    return "\n".join(out)


def _import(
    raw: str, importer: Path, line: int, root: Path, ctx: ProjectContext, stack: tuple[Path, ...]
) -> str:
    target = (importer.parent / Path(raw).expanduser()).resolve()
    where = f"{importer}:{line}"
    if not target.is_relative_to(root):
        return _refuse(ctx, f"@{raw} ({where}) is outside the project root {root}")
    if target in stack:
        return _refuse(ctx, f"@{raw} ({where}) is an import cycle")
    if len(stack) > MAX_DEPTH:
        return _refuse(ctx, f"@{raw} ({where}) is nested deeper than {MAX_DEPTH} imports")
    if not target.is_file():
        return _refuse(ctx, f"@{raw} ({where}) does not exist")
    return _expand(target, root, ctx, (*stack, target)).rstrip("\n")


def _refuse(ctx: ProjectContext, reason: str) -> str:
    ctx.refused.append(reason)
    log.warning("CHORUS.md import refused: %s", reason)
    return f"[chorus: import refused: {reason}]"


def _read(path: Path, ctx: ProjectContext) -> str:
    try:
        data = path.read_bytes()[:MAX_FILE_BYTES]
    except OSError as exc:
        ctx.refused.append(f"{path}: cannot read ({exc.strerror})")
        return ""
    return data.decode("utf-8", errors="replace")
