"""The JSONL mirror: ``CHORUS_HOME/sessions/<session_id>.jsonl``, one event per line.

It is written by the store's writer thread after each commit, with exactly the
(redacted) JSON stored in the ``events`` table, so ``cat`` shows what the log
holds. The database is the source of truth: the mirror may lag it by the last
batch after a crash, and :meth:`JsonlMirror.rebuild` rewrites it. Each batch is
appended with ``O_APPEND`` writes of whole lines, so readers never see a line
from two batches interleaved.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import BinaryIO

from chorus.store._records import check_id


class JsonlMirror:
    """Appends serialized events to per-session files under ``directory``."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def path(self, session_id: str) -> Path:
        """The mirror file of a session (the id is checked, so it cannot escape)."""
        return self.directory / f"{check_id(session_id, 'session id')}.jsonl"

    def append(self, lines_by_session: Mapping[str, Sequence[str]]) -> None:
        """Append each session's lines (JSON without newline). Raises ``OSError``."""
        self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        for session_id, lines in lines_by_session.items():
            if lines:
                _append_bytes(self.path(session_id), _encode(lines))

    def last_seq(self, session_id: str) -> int:
        """The ``seq`` of the mirror's last whole line (0: no file, empty, or unreadable)."""
        try:
            with self.path(session_id).open("rb") as file:
                tail = _tail(file)
        except OSError:
            return 0
        lines = tail.rstrip(b"\n").rsplit(b"\n", 1)
        if not tail.endswith(b"\n"):
            return -1  # a torn last line: rebuild
        try:
            seq = json.loads(lines[-1]).get("seq", 0)
        except (ValueError, AttributeError):
            return -1
        return seq if isinstance(seq, int) else -1

    def rebuild(self, session_id: str, lines: Iterable[str]) -> None:
        """Replace the session's mirror atomically (write aside, then rename)."""
        self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        target = self.path(session_id)
        temp = target.with_suffix(".jsonl.tmp")
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            for chunk in _chunks(lines, 1000):
                _write_all(fd, _encode(chunk))
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp, target)


def _tail(file: BinaryIO, size: int = 1 << 16) -> bytes:
    """The file's last ``size`` bytes (enough for the last line of nearly any event;
    a longer one reads as unparseable and the mirror is rebuilt, which is safe)."""
    file.seek(0, os.SEEK_END)
    end = file.tell()
    file.seek(max(0, end - size))
    return file.read()


def _encode(lines: Sequence[str]) -> bytes:
    return ("\n".join(lines) + "\n").encode("utf-8")


def _chunks(lines: Iterable[str], size: int) -> Iterable[list[str]]:
    chunk: list[str] = []
    for line in lines:
        chunk.append(line)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _append_bytes(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        _write_all(fd, data)
    finally:
        os.close(fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]
