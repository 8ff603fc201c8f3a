"""The daemon, optionally under tracemalloc: ``python bench/_soak_daemon.py [REPORT]``.

With a REPORT path, the first SIGUSR1 starts tracemalloc (so start-up and warm-up run
at full speed) and takes the baseline; each later one writes the 25 allocation sites
that grew most since (by traceback): what is still alive of what was allocated after
warm-up.

SIGUSR2 writes a probe to ``probe.json`` beside the report (or in CHORUS_HOME without
one): after a full collection (so that garbage awaiting the collector is not counted
as alive), the RSS, the number of objects the garbage collector tracks and the count
of each type. When a file ``trim`` lies there, the probe also calls glibc's
``malloc_trim(0)`` and gives the RSS after it: what of the RSS is memory the allocator
holds but nothing uses (fragmentation), not live objects. When a file ``chain`` there
names a type, the probe adds what holds its oldest three instances: a chain of
referrers up to a module or the event loop. Each probe also counts the trims the
daemon made itself (its :class:`~chorus.daemon._trim.IdleTrim`, once idle after jobs).
"""

from __future__ import annotations

import collections
import ctypes
import gc
import json
import linecache
import os
import signal
import sys
import time
import tracemalloc
import types
from pathlib import Path
from types import FrameType


def _report(out: Path) -> None:
    base: list[tracemalloc.Snapshot] = []
    ignore = [
        tracemalloc.Filter(False, tracemalloc.__file__),
        tracemalloc.Filter(False, "<frozen*"),
    ]

    def dump(signum: int, frame: FrameType | None) -> None:
        if not base:
            tracemalloc.start(10)
            base.append(tracemalloc.take_snapshot().filter_traces(ignore))
            _publish(out, "baseline taken\n")
            return
        snap = tracemalloc.take_snapshot().filter_traces(ignore)
        lines = []
        for stat in snap.compare_to(base[0], "traceback")[:25]:
            lines.append(f"{stat.size_diff / 1024:+10.1f} KiB {stat.count_diff:+8d} blocks")
            for fr in list(stat.traceback)[-6:]:
                src = linecache.getline(fr.filename, fr.lineno).strip()
                lines.append(f"      {fr.filename}:{fr.lineno}  {src}")
        _publish(out, "\n".join(lines) + "\n")

    signal.signal(signal.SIGUSR1, dump)


def _probe(folder: Path) -> None:
    sizes: dict[int, int] = {}  # the big containers' lengths at the last probe

    def probe(signum: int, frame: FrameType | None) -> None:
        collected = gc.collect()
        objects = gc.get_objects()
        kinds = collections.Counter(type(o).__qualname__ for o in objects)
        found: dict[str, object] = {"rss_kb": _rss_kb(), "objects": len(objects)}
        found |= {"collected": collected, "types": dict(kinds), **_memory()}
        found["grown"] = _grown_containers(objects, sizes)
        found["daemon_trims"] = len(_DAEMON_TRIMS)
        wanted = folder / "chain"
        if wanted.exists():
            name = wanted.read_text().strip()
            some = [o for o in objects if type(o).__qualname__ == name][:3]
            objects.clear()
            found["chains"] = [_holders(o) for o in some]
        del objects
        if (folder / "trim").exists():
            ctypes.CDLL("libc.so.6").malloc_trim(0)
            found["rss_after_trim_kb"] = _rss_kb()
        _publish(folder / "probe.json", json.dumps(found))

    signal.signal(signal.SIGUSR2, probe)


def _grown_containers(objects: list[object], sizes: dict[int, int]) -> list[str]:
    """Containers of 200 items or more that grew by 50 or more since the last probe,
    with what holds them: a map that grows with every job shows here."""
    big = {id(o): o for o in objects if _length(o) >= 200}
    for obj in objects:  # dicts of atomic keys and values are not tracked: reach them
        for ref in gc.get_referents(obj):
            if isinstance(ref, dict) and not gc.is_tracked(ref) and len(ref) >= 200:
                big[id(ref)] = ref
    out = []
    for key, obj in big.items():
        was = sizes.get(key)
        if was is not None and _length(obj) - was >= 50:
            holders = " <- ".join(_holders(obj)[::-1][:8])
            out.append(f"{type(obj).__qualname__} {was} -> {_length(obj)}: {holders}")
    sizes.clear()
    sizes.update({key: _length(obj) for key, obj in big.items()})
    return out


def _length(obj: object) -> int:
    if isinstance(obj, (dict, list, set, collections.deque)):
        return len(obj)
    return 0


def _holders(obj: object, limit: int = 200_000) -> list[str]:
    """The shortest chain of referrers from a module (or the event loop) to ``obj``."""
    seen, queue, up = {id(obj)}, collections.deque([obj]), {id(obj): obj}
    parent: dict[int, object] = {}
    while queue and len(seen) < limit:
        here = queue.popleft()
        if isinstance(here, types.ModuleType) or type(here).__name__.endswith("EventLoop"):
            return _describe(here, parent)
        for ref in gc.get_referrers(here):
            if (
                id(ref) in seen
                or isinstance(ref, types.FrameType)
                or any(ref is x for x in (queue, up, parent))
            ):
                continue
            seen.add(id(ref))
            up[id(ref)], parent[id(ref)] = ref, here
            queue.append(ref)
    return ["(no chain found)"]


def _describe(top: object, parent: dict[int, object]) -> list[str]:
    chain, here = [], top
    while here is not None:
        chain.append(f"{type(here).__qualname__} {_label(here)}")
        here = parent.get(id(here))
    return chain


def _label(obj: object) -> str:
    if isinstance(obj, types.ModuleType):
        return obj.__name__
    if isinstance(obj, dict):
        return "keys " + ", ".join(map(str, list(obj)[:6]))[:160]
    return repr(obj)[:120] if isinstance(obj, (str, int, tuple)) else ""


def _memory() -> dict[str, int]:
    """Where the memory is: anonymous RSS, Python's allocated blocks, SQLite's own
    memory (its page caches: bounded by ``cache_size`` per connection)."""
    status = Path("/proc/self/status").read_text().splitlines()
    anon = next((int(x.split()[1]) for x in status if x.startswith("RssAnon:")), 0)
    sqlite = ctypes.CDLL("libsqlite3.so.0")
    sqlite.sqlite3_memory_used.restype = ctypes.c_int64
    return {
        "anon_kb": anon,
        "py_blocks": sys.getallocatedblocks(),
        "sqlite_kb": sqlite.sqlite3_memory_used() // 1024,
    }


def _rss_kb() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _publish(out: Path, text: str) -> None:
    """Write aside, then rename: the bench sees the whole report or none."""
    tmp = out.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.replace(out)


_DAEMON_TRIMS: list[float] = []  # when the daemon trimmed itself (monotonic)


def _count_daemon_trims() -> None:
    """Wrap the daemon's own trim (before its server module binds it) to count it."""
    from chorus.daemon import _trim

    real = _trim.libc_trim

    def counted() -> _trim.Trim | None:
        trim = real()
        if trim is None:
            return None

        def counting() -> object:
            _DAEMON_TRIMS.append(time.monotonic())
            return trim()

        return counting

    _trim.libc_trim = counted


def main() -> None:
    _count_daemon_trims()
    if len(sys.argv) > 1:
        _report(Path(sys.argv[1]))
    _probe(Path(sys.argv[1]).parent if len(sys.argv) > 1 else Path(os.environ["CHORUS_HOME"]))
    from chorus.daemon._server import main as serve

    serve()


if __name__ == "__main__":
    main()
