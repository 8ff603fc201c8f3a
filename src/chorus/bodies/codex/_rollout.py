"""Codex's own record of a thread (its "rollout"), read to complete ``codex exec --json``.

``codex exec --json`` leaves some tool calls out of its stdout: a command that
Codex judges blocked by its sandbox (``Permission denied``, ``Read-only file
system``, or a denied program's stub) and a patch it rejects print no item at
all, although the model saw their output. The rollout
(``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<thread id>.jsonl``, appended
by every ``exec resume`` of the thread) has every call and its output.

:class:`RolloutTail` follows that file for one body. :meth:`RolloutTail.mark`
before each run remembers where the run starts. :meth:`RolloutTail.wrap` wraps
the run's raw tap: each time the transport reads a stdout line, the rollout's new
lines that matter (:func:`chorus.bodies.codex.rollout_wanted`) are tapped first,
as stdout lines, and queued; :meth:`RolloutTail.before` feeds the codec the lines
queued ahead of the stdout line it is about to get, :meth:`RolloutTail.rest` those
written after the last one. The codec so sees the lines in the order they are
recorded, and ``chorus replay`` reproduces the same events.

The rollout lies in the CLI's own folder, which the body (untrusted) can write:
the file is opened beneath ``CODEX_HOME`` one folder at a time without following
links, must be a regular file with one link, and is read in bounded pieces.
Anything else reads as nothing.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import stat
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

from chorus.bodies.codex._exec_codec import ExecCodec, rollout_wanted
from chorus.events import Event

#: Bytes read per drain at most, and the longest line kept (longer ones are skipped:
#: prompts and instructions, never the tool lines the codec wants).
_READ_CAP = 8 << 20
_LINE_CAP = 1 << 20
_FOLDER_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
#: A thread id as Codex makes them (a UUID); anything else names no file.
_THREAD_ID = re.compile(r"[0-9A-Za-z-]{1,64}")

#: ``(stream, line)``, as :data:`chorus.bodies.RawTap`.
Tap = Callable[[str, str], None]


def codex_home(env: Mapping[str, str]) -> Path | None:
    """The CLI's folder for the environment it runs with (``CODEX_HOME``, else
    ``$HOME/.codex``); ``None`` without either."""
    if env.get("CODEX_HOME"):
        return Path(env["CODEX_HOME"])
    return Path(env["HOME"]) / ".codex" if env.get("HOME") else None


class RolloutTail:
    """The unread end of one thread's rollout, fed to a codec in recorded order."""

    def __init__(self, home: Path | None) -> None:
        self.home = home
        self._thread: str | None = None
        self._relative: Path | None = None
        self._offset = 0
        self._partial = b""
        self._queued: deque[list[str]] = deque()
        self._tap: Tap | None = None

    def mark(self, thread_id: str | None) -> None:
        """Before a run: what is in the file now is history, not this run."""
        self._thread = thread_id
        self._relative = self._find(thread_id) if thread_id else None
        self._offset = self._size() if self._relative is not None else 0
        self._partial = b""
        self._queued.clear()

    def wrap(self, tap: Tap | None) -> Tap:
        """The run's raw tap: before each stdout line, the rollout's new lines."""
        self._tap = tap

        def tapped(stream: str, line: str) -> None:
            if stream == "stdout":
                self._thread = self._thread or _started_thread(line)
                self._queued.append(self._read())
            if tap is not None:
                tap(stream, line)

        return tapped

    def before(self, codec: ExecCodec) -> list[Event]:
        """Feed ``codec`` the lines recorded ahead of its next stdout line."""
        lines = self._queued.popleft() if self._queued else []
        return [event for line in lines for event in codec.receive_line(line)]

    def rest(self, codec: ExecCodec) -> list[Event]:
        """After the process ended: feed ``codec`` what was written since."""
        lines = [line for queued in self._queued for line in queued] + self._read()
        self._queued.clear()
        return [event for line in lines for event in codec.receive_line(line)]

    def _read(self) -> list[str]:
        """The new wanted lines, tapped as stdout."""
        if self._relative is None and self._thread:
            self._relative = self._find(self._thread)
        wanted = [line for line in self._new_lines() if rollout_wanted(line)]
        for line in wanted:
            if self._tap is not None:
                self._tap("stdout", line)
        return wanted

    def _find(self, thread_id: str) -> Path | None:
        sessions = self.home / "sessions" if self.home else None
        if sessions is None or not _THREAD_ID.fullmatch(thread_id) or not sessions.is_dir():
            return None
        found = sorted(sessions.glob(f"*/*/*/rollout-*-{thread_id}.jsonl"))
        return found[-1].relative_to(self.home) if found and self.home else None

    def _size(self) -> int:
        with self._opened() as fd:
            size = os.fstat(fd).st_size if fd is not None else 0
        return size

    def _new_lines(self) -> Iterator[str]:
        with self._opened() as fd:
            if fd is None:
                return
            os.lseek(fd, self._offset, os.SEEK_SET)
            data = os.read(fd, _READ_CAP)
        self._offset += len(data)
        *complete, self._partial = (self._partial + data).split(b"\n")
        if len(self._partial) > _LINE_CAP:
            self._partial = b""
        for raw in complete:
            if raw and len(raw) <= _LINE_CAP:
                yield raw.decode("utf-8", errors="replace")

    @contextlib.contextmanager
    def _opened(self) -> Iterator[int | None]:
        fd = _open_beneath(self.home, self._relative) if self.home and self._relative else None
        try:
            yield fd
        finally:
            if fd is not None:
                os.close(fd)


def _started_thread(line: str) -> str | None:
    """The thread id of exec's ``thread.started`` line (a new thread names it there)."""
    if "thread.started" not in line:
        return None
    try:
        message = json.loads(line)
    except ValueError:
        return None
    thread = message.get("thread_id") if isinstance(message, dict) else None
    return thread if isinstance(thread, str) and message.get("type") == "thread.started" else None


def _open_beneath(home: Path, relative: Path) -> int | None:
    """``home / relative`` opened without following any link on the way; ``None``
    when a part is a link, the file is not a plain file, or it has other links."""
    try:
        folder = os.open(home, _FOLDER_FLAGS)
    except OSError:
        return None
    if any(part in ("..", ".") for part in relative.parts):
        os.close(folder)
        return None
    try:
        for part in relative.parts[:-1]:
            inner = os.open(part, _FOLDER_FLAGS, dir_fd=folder)
            os.close(folder)
            folder = inner
        fd = os.open(relative.parts[-1], _FILE_FLAGS, dir_fd=folder)
    except OSError:
        return None
    finally:
        os.close(folder)
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
        os.close(fd)
        return None
    return fd
