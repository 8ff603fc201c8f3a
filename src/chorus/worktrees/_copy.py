"""Copying the configured untracked files (``[worktree] copy``) into a new worktree,
never through a link that leads out of the checkout.

The main checkout holds what bodies wrote: a ``.envrc`` that is a link to
``~/.ssh/id_rsa`` or to CHORUS_HOME's token would carry that file into the
worktree, where the next body reads it. So a file is copied only when it is a
regular file whose real path (links resolved) is inside the source checkout and
outside its ``.git``; it is then opened along that real path, one component at a
time from the checkout's own descriptor with ``O_NOFOLLOW`` (a link swapped in
after the check makes the open fail), and written the same way below the new
worktree with ``O_EXCL`` (never through a link, never over a file already there).
A refused file is reported (:attr:`Copies.refused`), never copied.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_WRITE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class RefusedError(Exception):
    """A file that must not be copied, and why."""


@dataclass(slots=True)
class Copies:
    """What was copied, and what was refused (``"<path>: <why>"``)."""

    copied: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)


def copy_untracked(source: Path, dest: Path, patterns: Sequence[str]) -> Copies:
    """Copy the files matching ``patterns`` (globs relative to ``source``) that
    ``dest`` does not have yet (tracked files are there already)."""
    done = Copies()
    real = source.resolve()
    for pattern in patterns:
        for found in sorted(source.glob(pattern)):
            rel = found.relative_to(source)
            if ".git" in rel.parts:
                continue
            try:
                if _copy_one(real, found, dest, rel):
                    done.copied.append(str(rel))
            except RefusedError as exc:
                done.refused.append(f"{rel}: {exc}")
    return done


def _copy_one(real_source: Path, found: Path, dest: Path, rel: Path) -> bool:
    """Copy one file; False when there is nothing to copy (a folder, or ``dest``
    has it already); :class:`RefusedError` when it must not be copied."""
    inside = _inside(real_source, found)
    with _opened_source(real_source, inside) as (fd, info):
        if stat.S_ISDIR(info.st_mode):
            return False
        if not stat.S_ISREG(info.st_mode):
            raise RefusedError("not a regular file")
        return _write(dest, rel, fd, info)


def _inside(real_source: Path, found: Path) -> tuple[str, ...]:
    """The parts of ``found``'s real path below the checkout; :class:`RefusedError` when
    a link leads outside it or into its ``.git``."""
    real = Path(os.path.realpath(found))
    if real == real_source:
        raise RefusedError("a link to the checkout itself")
    if not real.is_relative_to(real_source):
        raise RefusedError(f"a link to {real}, outside the checkout")
    parts = real.relative_to(real_source).parts
    if ".git" in parts:
        raise RefusedError("a link into .git")
    return parts


@contextlib.contextmanager
def _opened_source(root: Path, parts: Sequence[str]) -> Iterator[tuple[int, os.stat_result]]:
    try:
        fd = _walk_open(root, parts, _READ)
    except OSError as exc:
        why = "a link appeared on its way" if exc.errno == errno.ELOOP else exc.strerror
        raise RefusedError(f"cannot be read safely ({why})") from exc
    try:
        yield fd, os.fstat(fd)
    finally:
        os.close(fd)


def _walk_open(root: Path, parts: Sequence[str], flags: int, mode: int = 0o600) -> int:
    """Open ``root/parts...`` following no link on the way (``root`` itself is trusted)."""
    at = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in parts[:-1]:
            if flags & os.O_CREAT:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, dir_fd=at)
            at, parent = os.open(part, _DIR, dir_fd=at), at
            os.close(parent)
        return os.open(parts[-1], flags, mode, dir_fd=at)
    finally:
        os.close(at)


def _write(dest: Path, rel: Path, src: int, info: os.stat_result) -> bool:
    try:
        out = _walk_open(dest, rel.parts, _WRITE, stat.S_IMODE(info.st_mode) & 0o777)
    except FileExistsError:
        return False  # tracked, so the worktree has it already
    except OSError as exc:
        raise RefusedError(f"cannot be written safely in the worktree ({exc.strerror})") from exc
    try:
        with open(src, "rb", closefd=False) as reader, open(out, "wb", closefd=False) as writer:
            shutil.copyfileobj(reader, writer)
        os.utime(out, ns=(info.st_atime_ns, info.st_mtime_ns))
    finally:
        os.close(out)
    return True
