"""``**/NAME`` patterns expanded under a folder in one walk, not one glob each, and
not all over again at the next body start.

The policy's denied paths hold several patterns of that shape (``**/.env``,
``**/*.pem``, ``**/id_rsa*``...); globbing each one walks the body's whole folder
again, at every body start. :func:`tree_matches` walks it once and tests every
name against all of them, with :mod:`glob`'s rules: ``**`` enters no hidden
folder, a name starting with a dot matches only a pattern that does, links to
folders are followed (each folder once).

A walk lists every folder of the tree: 52 ms for a folder of 52,000 files, at each
body start. What each folder gave is kept (its matches, the folders to enter) with
the folder's status change time; the next walk lists again only a folder whose time
moved (a name in it was added, removed or renamed) or that changed too close to its
listing for the time to tell (:data:`RACY_NS`), and only stats the rest. The status
change time, not the modification time: a body may set a folder's modification time
back (``touch -d``) to hide a name added to it, but no process can set the other.
"""

from __future__ import annotations

import fnmatch
import os
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
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
    counts: dict[str, int] = dict.fromkeys(names, 0)
    out: list[Path] = []
    for folder, entry, index in _TREES.matches(tuple(names), str(root)):
        name = names[index]
        if counts[name] < limit:
            counts[name] += 1
            out.append(Path(folder, entry).resolve())
    return out


#: A folder whose change time is this close to when it was listed is listed again
#: next time: a name added just after the listing may leave the time as it was
#: (the clock's grain; 2 s on some file systems).
RACY_NS = 3_000_000_000
#: Trees kept (one per body folder and set of patterns), the least used dropped.
TREES_KEPT = 8
#: A tree of more folders than this is walked whole each time rather than kept
#: (a folder kept is about 250 bytes: 8 trees of 20,000 folders, 40 MB at most).
FOLDERS_KEPT = 20_000


@dataclass(frozen=True, slots=True)
class _Listed:
    """What one folder gave when it was listed."""

    ctime_ns: int
    racy: bool
    #: (name, index of the pattern it matched)
    matches: tuple[tuple[str, int], ...]
    #: The folders in it to enter (not hidden; links to folders included).
    subdirs: tuple[str, ...]


class _Trees:
    """The walks done, by (patterns, root): each folder's listing, reused while the
    folder's change time says nothing in it was added, removed or renamed."""

    def __init__(self) -> None:
        self._trees: OrderedDict[tuple[tuple[str, ...], str], dict[str, _Listed]] = OrderedDict()
        self._lock = threading.Lock()

    def matches(self, names: tuple[str, ...], root: str) -> list[tuple[str, str, int]]:
        """(folder, name, pattern index) of each match under ``root``."""
        with self._lock:
            key = (names, root)
            known = self._trees.pop(key, {})
            fresh: dict[str, _Listed] = {}
            found = list(_walk(root, _Patterns(names), known, fresh))
            if len(fresh) <= FOLDERS_KEPT:  # only what this walk reached: gone ones drop
                self._trees[key] = fresh
            while len(self._trees) > TREES_KEPT:
                self._trees.popitem(last=False)
            return found


class _Patterns:
    """The names as two expressions (dot names apart); the group that matched
    names the pattern's index."""

    def __init__(self, names: Sequence[str]) -> None:
        self.dotted = _regex({i: n for i, n in enumerate(names) if n.startswith(".")})
        self.plain = _regex({i: n for i, n in enumerate(names) if not n.startswith(".")})


_TREES = _Trees()


def _walk(
    root: str, patterns: _Patterns, known: dict[str, _Listed], fresh: dict[str, _Listed]
) -> Iterator[tuple[str, str, int]]:
    """Every match under ``root``, entering no hidden folder and each folder once;
    a folder is listed anew unless ``known`` holds it unchanged."""
    seen: set[tuple[int, int]] = set()
    todo = [root]
    while todo:
        folder = todo.pop()
        try:
            info = os.stat(folder)
            if (info.st_dev, info.st_ino) in seen:
                continue
            seen.add((info.st_dev, info.st_ino))
            listed = _reuse(known.get(folder), info) or _list(folder, info, patterns)
        except OSError:
            continue
        fresh[folder] = listed
        yield from ((folder, name, index) for name, index in listed.matches)
        todo.extend(listed.subdirs)


def _reuse(listed: _Listed | None, info: os.stat_result) -> _Listed | None:
    if listed is None or listed.racy or listed.ctime_ns != info.st_ctime_ns:
        return None
    return listed


def _list(folder: str, info: os.stat_result, patterns: _Patterns) -> _Listed:
    now = time.time_ns()
    matches: list[tuple[str, int]] = []
    subdirs: list[str] = []
    dotted, plain = patterns.dotted.fullmatch, patterns.plain.fullmatch
    with os.scandir(folder) as found:
        for entry in found:
            name = entry.name
            hidden = name.startswith(".")
            if (match := (dotted if hidden else plain)(name)) is not None:
                matches.append((name, int(str(match.lastgroup)[1:])))
            if not hidden and _is_dir(entry):
                subdirs.append(entry.path)
    racy = info.st_ctime_ns >= now - RACY_NS
    return _Listed(info.st_ctime_ns, racy, tuple(matches), tuple(subdirs))


def _regex(names: dict[int, str]) -> re.Pattern[str]:
    """One expression for all ``names``; the group that matched names its index."""
    if not names:
        return re.compile(r"(?!)")
    return re.compile("|".join(f"(?P<n{i}>{fnmatch.translate(n)})" for i, n in names.items()))


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False
