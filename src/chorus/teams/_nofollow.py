"""File access in the drop folders that no link can steer.

Anyone who can write a drop folder can put a symbolic link there (to the gateway
token, say), a named pipe (a reader would wait forever), a folder or a device. So
nothing under ``teams/`` is reached by path: each folder from ``teams/`` down is
opened relative to its parent with ``O_NOFOLLOW | O_DIRECTORY``, an entry is
looked at with ``lstat`` (never opened unless it is a regular file), then opened
with ``O_NOFOLLOW | O_NONBLOCK`` and checked again with ``fstat`` (same file,
still regular) before a byte is read. Moves and the ``.reason`` files of
``rejected/`` go through the same folder handles; a ``.reason`` is written under
a fresh name and renamed over whatever was there, so a planted link is replaced,
never written through.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Iterator, Sequence

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_KINDS = (
    (stat.S_ISLNK, "a symbolic link (links are not followed)"),
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


class NotRegularError(Exception):
    """The entry is not a regular file; the text says what it is."""


class UnsafeFolderError(Exception):
    """A folder on the way is a link or not a folder: nothing in it is touched."""


def kind_of(mode: int) -> str:
    """What a non-regular ``st_mode`` is, in words."""
    for test, words in _KINDS:
        if test(mode):
            return words
    return "not a regular file"


@contextlib.contextmanager
def open_folder(root: str | os.PathLike[str], parts: Sequence[str]) -> Iterator[int]:
    """A handle on ``root/parts...``, each part opened without following a link."""
    fd = os.open(root, _DIR_FLAGS)
    try:
        for part in parts:
            parent, fd = fd, -1
            try:
                fd = sub_folder(parent, part)
            finally:
                os.close(parent)
        yield fd
    finally:
        if fd >= 0:
            os.close(fd)


def sub_folder(parent: int, name: str) -> int:
    """A handle on the folder ``name`` in ``parent`` (a link or a file: refused)."""
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=parent)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise UnsafeFolderError(f"{name!r} is a link or not a folder") from exc
        raise


def read_regular(folder: int, name: str, limit: int) -> bytes:
    """Up to ``limit + 1`` bytes of the regular file ``name`` in ``folder``.

    Raises :class:`NotRegularError` for anything else (the file is not opened
    unless ``lstat`` says it is regular) and ``FileNotFoundError`` when it is gone."""
    mode = os.lstat(name, dir_fd=folder).st_mode
    if not stat.S_ISREG(mode):
        raise NotRegularError(kind_of(mode))
    try:
        fd = os.open(name, _FILE_FLAGS, dir_fd=folder)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # swapped for a link since the lstat
            raise NotRegularError(kind_of(stat.S_IFLNK)) from exc
        raise
    try:
        return _read_open(fd, limit)
    finally:
        os.close(fd)


def _read_open(fd: int, limit: int) -> bytes:
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        raise NotRegularError(kind_of(mode))
    os.set_blocking(fd, True)
    chunks: list[bytes] = []
    left = limit + 1
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 16))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def move_aside(folder: int, name: str, into: str, reason: str) -> str:
    """Move entry ``name`` (whatever it is; a link moves as a link) into the sub-folder
    ``into`` with ``NAME.reason`` beside it; returns the name it got there."""
    with contextlib.suppress(FileExistsError):
        os.mkdir(into, 0o700, dir_fd=folder)
    aside = sub_folder(folder, into)
    try:
        target = _free_name(aside, name)
        os.rename(name, target, src_dir_fd=folder, dst_dir_fd=aside)
        write_replacing(aside, f"{target}.reason", reason + "\n")
    finally:
        os.close(aside)
    return target


def _free_name(folder: int, name: str) -> str:
    """``name``, or ``name.N`` when something of that name is already there."""
    candidate, n = name, 0
    while _exists(folder, candidate) or _exists(folder, f"{candidate}.reason"):
        n += 1
        candidate = f"{name}.{n}"
    return candidate


def _exists(folder: int, name: str) -> bool:
    try:
        os.lstat(name, dir_fd=folder)
    except FileNotFoundError:
        return False
    return True


def write_replacing(folder: int, name: str, text: str) -> None:
    """Write ``text`` to ``name`` in ``folder``: a new file renamed over the old entry."""
    tmp = f".{name}.{secrets.token_hex(4)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=folder)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)
    os.replace(tmp, name, src_dir_fd=folder, dst_dir_fd=folder)


def remove(folder: int, name: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(name, dir_fd=folder)
