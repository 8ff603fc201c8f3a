"""Project context files: ``CHORUS.md`` from the git root down to the cwd.

A line that is only ``@path`` imports that file in its place (the path is relative
to the importing file; ``~`` is the home folder). A body may have written any of
these files, and Chorus reads them with the daemon's rights, outside the sandbox;
so each context file and each import is checked against the job's policy as the
body's own read would be (:class:`Scope`): every link is followed to the real
target, which must lie inside the job's roots (the policy's allowed paths at its
cwd; not the git root) and match no denied path (``.env``, keys, CHORUS_HOME...).
The checked path is then opened with no link anywhere in it and read only if it is
a regular file without other hard links. A context file above the job's roots is
not read; a refused import, a cycle, a missing file or more than :data:`MAX_DEPTH`
levels is logged and left as a visible ``[chorus: ...]`` line naming the path and
why, never its content.
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from chorus.memory import read_regular
from chorus.policy import PathContext, PathVerdict, Policy, check_path, load_policy

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


@dataclass(frozen=True, slots=True)
class Scope:
    """What a job may read: its policy's allowed paths (its roots) and denied paths,
    with the placeholders (``{cwd}`` ...) standing for the job's folder."""

    ctx: PathContext
    allowed: list[str]
    denied: list[str]

    @classmethod
    def of(cls, policy: Policy, cwd: Path) -> Scope:
        fs = policy.filesystem
        return cls(PathContext.current(cwd), list(fs.allowed_paths), list(fs.denied_paths))

    def check(self, path: Path) -> PathVerdict:
        """The policy's own verdict on reading ``path`` (links followed; the real
        target must be under a root, neither form may match a denied path)."""
        return check_path(
            str(path), self.ctx, allowed=self.allowed, read_only=[], denied=self.denied, write=False
        )


@dataclass(slots=True)
class _Walk:
    """One expansion: the scope, what is refused, and the files being expanded."""

    scope: Scope
    out: ProjectContext
    stack: tuple[Path, ...] = ()


def project_root(cwd: Path) -> Path:
    """The nearest folder at or above ``cwd`` holding ``.git``; ``cwd`` if none."""
    cwd = cwd.resolve()
    for folder in (cwd, *cwd.parents):
        if (folder / ".git").exists():
            return folder
    return cwd


def load_project(cwd: Path, policy: Policy | None = None) -> ProjectContext:
    """Every ``CHORUS.md`` from the root down to ``cwd`` that the job may read,
    imports expanded, under ``policy`` (by default ``CHORUS_HOME/policy.toml``)."""
    cwd = cwd.resolve()
    root = project_root(cwd)
    walk = _Walk(Scope.of(policy or load_policy(), cwd), ProjectContext(root))
    for folder in _folders(cwd, root):
        path = folder / FILE_NAME
        if os.path.lexists(path):
            _add_file(path, walk)
    return walk.out


def _folders(cwd: Path, root: Path) -> list[Path]:
    below = [p for p in cwd.parents if p.is_relative_to(root) and p != root]
    return list(dict.fromkeys([root, *reversed(below), cwd]))


def _add_file(path: Path, walk: _Walk) -> None:
    verdict = walk.scope.check(path)
    if not verdict.ok or verdict.path is None:
        shown = f"{_short(path, walk)}: {_brief(verdict)}"
        walk.out.files.append((path, _refuse(walk.out, verdict.reason, shown, "not read")))
        return
    real = verdict.path.real
    try:
        text = _read(real)
    except OSError as exc:
        reason = f"{_short(path, walk)}: {exc.strerror}"
        walk.out.files.append((path, _refuse(walk.out, reason, reason, "not read")))
        return
    walk.stack = (real,)
    walk.out.files.append((path, _expand(text, real, walk)))


def _expand(text: str, path: Path, walk: _Walk) -> str:
    out = []
    for n, line in enumerate(text.split("\n"), start=1):
        match = _IMPORT_RE.match(line)
        where = f"@{match.group(1)} ({_short(path, walk)}:{n})" if match else ""
        out.append(_import(match.group(1), where, path.parent, walk) if match else line)
    return "\n".join(out)


def _import(raw: str, where: str, base: Path, walk: _Walk) -> str:
    verdict = walk.scope.check(base / Path(raw).expanduser())
    if not verdict.ok or verdict.path is None:
        return _refuse(walk.out, f"{where}: {verdict.reason}", f"{where}: {_brief(verdict)}")
    target = verdict.path.real
    if target in walk.stack:
        return _refuse(walk.out, f"{where} is an import cycle")
    if len(walk.stack) > MAX_DEPTH:
        return _refuse(walk.out, f"{where} is nested deeper than {MAX_DEPTH} imports")
    if not target.exists():
        return _refuse(walk.out, f"{where} does not exist")
    try:
        text = _read(target)
    except OSError as exc:
        return _refuse(walk.out, f"{where} cannot be read: {exc.strerror}")
    outer, walk.stack = walk.stack, (*walk.stack, target)
    try:
        return _expand(text, target, walk).rstrip("\n")
    finally:
        walk.stack = outer


def _short(path: Path, walk: _Walk) -> str:
    """``path`` as the context names it: from the project root when it is inside."""
    root = walk.out.root
    return str(path.relative_to(root)) if path.is_relative_to(root) else str(path)


def _brief(verdict: PathVerdict) -> str:
    """Why the policy refuses, in a few words (the whole reason goes to the notes)."""
    resolved = verdict.path
    link = f"a link to {resolved.real}, " if resolved is not None and resolved.via_symlink else ""
    if verdict.rule == "filesystem.denied_path":
        return f"{link}a denied path ({verdict.reason.rpartition(' the denied path ')[2]})"
    if verdict.rule == "filesystem.outside_roots":
        return f"{link}outside the job's roots"
    return verdict.reason


def _refuse(
    ctx: ProjectContext, reason: str, shown: str | None = None, what: str = "import refused"
) -> str:
    """Note ``reason`` (logged, in :attr:`ProjectContext.refused`) and return the
    visible line (``shown``, briefer, or the reason) in the file's or import's place."""
    ctx.refused.append(reason)
    log.warning("CHORUS.md %s: %s", what, reason)
    return f"[chorus: {what}: {shown or reason}]"


def _read(path: Path) -> str:
    """The text of the checked real ``path``: no link anywhere in it, a regular file
    with no other hard link (:func:`chorus.memory.read_regular`)."""
    data = read_regular(path, MAX_FILE_BYTES, single_link=True, no_links=True)
    return data.decode("utf-8", errors="replace")
