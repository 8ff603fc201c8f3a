"""The meter's records on disk: one JSON object a line, appended by the meter's
process as each request ends, read by offset by the daemon (the end offset of each
line names it), so a record made while no daemon runs waits there for the next."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

#: More than this is read from the spool at once (a catch-up continues where it ends).
MAX_READ = 8 << 20


class Spool:
    """The writing end (the meter's process): :meth:`append` returns the line's end."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)

    def append(self, record: dict[str, Any]) -> int:
        return self.append_line(self.line(record))

    @staticmethod
    def line(record: dict[str, Any]) -> bytes:
        return (json.dumps(record, separators=(",", ":")) + "\n").encode()

    def append_line(self, line: bytes) -> int:
        os.write(self._fd, line)  # one write: a reader sees a line whole or not at all
        return os.lseek(self._fd, 0, os.SEEK_CUR)

    def close(self) -> None:
        os.close(self._fd)


def read_spool(path: Path, start: int) -> list[tuple[int, dict[str, Any]]]:
    """The whole lines after byte ``start``, each with its end offset."""
    try:
        with path.open("rb") as file:
            file.seek(start)
            data = file.read(MAX_READ)
    except OSError:
        return []
    found: list[tuple[int, dict[str, Any]]] = []
    end = start
    for line in data.splitlines(keepends=True):
        if not line.endswith(b"\n"):
            break
        end += len(line)
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            found.append((end, record))
    return found
