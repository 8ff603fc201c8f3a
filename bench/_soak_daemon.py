"""The daemon, optionally under tracemalloc: ``python bench/_soak_daemon.py [REPORT]``.

With a REPORT path, the first SIGUSR1 starts tracemalloc (so start-up and warm-up run
at full speed) and takes the baseline; each later one writes the 25 allocation sites
that grew most since (by traceback): what is still alive of what was allocated after
warm-up.

SIGUSR2 writes a probe to ``probe.json`` beside the report (or in CHORUS_HOME without
one): the RSS, the number of objects the garbage collector tracks and the count of
each type. When a file ``trim`` lies there, the probe also calls glibc's
``malloc_trim(0)`` and gives the RSS after it: what of the RSS is memory the allocator
holds but nothing uses (fragmentation), not live objects.
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
import tracemalloc
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
    def probe(signum: int, frame: FrameType | None) -> None:
        objects = gc.get_objects()
        types = collections.Counter(type(o).__qualname__ for o in objects)
        found = {"rss_kb": _rss_kb(), "objects": len(objects), "types": dict(types)}
        del objects
        if (folder / "trim").exists():
            ctypes.CDLL("libc.so.6").malloc_trim(0)
            found["rss_after_trim_kb"] = _rss_kb()
        _publish(folder / "probe.json", json.dumps(found))

    signal.signal(signal.SIGUSR2, probe)


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


def main() -> None:
    if len(sys.argv) > 1:
        _report(Path(sys.argv[1]))
    _probe(Path(sys.argv[1]).parent if len(sys.argv) > 1 else Path(os.environ["CHORUS_HOME"]))
    from chorus.daemon._server import main as serve

    serve()


if __name__ == "__main__":
    main()
