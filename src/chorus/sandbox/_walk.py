"""``**/NAME`` patterns expanded under a folder in one walk, not one glob each.

The policy's denied paths hold several patterns of that shape (``**/.env``,
``**/*.pem``, ``**/id_rsa*``...); globbing each one walks the body's whole folder
again, at every body start. :func:`tree_matches` walks it once and tests every
name against all of them, with :mod:`glob`'s rules: ``**`` enters no hidden
folder, a name starting with a dot matches only a pattern that does, links to
folders are followed (each folder once).
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Iterator, Sequence
from pathlib import Path

PREFIX = "**/"


def is_tree_pattern(pattern: str) -> bool:
    """``**/NAME`` with no other folder in it (NAME may hold ``*``, ``?``, ``[]``)."""
    rest = pattern.removeprefix(PREFIX)
    return pattern.startswith(PREFIX) and bool(rest) and "/" not in rest and "**" not in rest


def tree_matches(patterns: Sequence[str], root: Path, limit: int) -> list[Path]:
    """What the ``**/NAME`` ``patterns`` match under ``root`` (``root`` included),
    at most ``limit`` paths for each pattern, resolved."""
    names = [p.removeprefix(PREFIX) for p in patterns]
    dotted = _regex({i: n for i, n in enumerate(names) if n.startswith(".")})
    plain = _regex({i: n for i, n in enumerate(names) if not n.startswith(".")})
    counts: dict[str, int] = dict.fromkeys(names, 0)
    out: list[Path] = []
    for folder, entry in _entries(root):
        match = (dotted if entry.startswith(".") else plain).fullmatch(entry)
        if match is None:
            continue
        name = names[int(str(match.lastgroup)[1:])]
        if counts[name] < limit:
            counts[name] += 1
            out.append(Path(folder, entry).resolve())
    return out


def _regex(names: dict[int, str]) -> re.Pattern[str]:
    """One expression for all ``names``; the group that matched names its index."""
    if not names:
        return re.compile(r"(?!)")
    return re.compile("|".join(f"(?P<n{i}>{fnmatch.translate(n)})" for i, n in names.items()))


def _entries(root: Path) -> Iterator[tuple[str, str]]:
    """(folder, name) of everything under ``root``, entering no hidden folder."""
    seen: set[tuple[int, int]] = set()
    todo = [str(root)]
    while todo:
        folder = todo.pop()
        try:
            info = os.stat(folder)
            if (info.st_dev, info.st_ino) in seen:
                continue
            seen.add((info.st_dev, info.st_ino))
            with os.scandir(folder) as found:
                entries = list(found)
        except OSError:
            continue
        for entry in entries:
            yield folder, entry.name
            if not entry.name.startswith(".") and _is_dir(entry):
                todo.append(entry.path)


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False
