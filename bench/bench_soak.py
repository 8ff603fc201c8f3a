"""Daemon memory over a long soak: RSS per 1,000 jobs, and what grows (tracemalloc).

Each job is a fast scripted one: a tiny ACP agent (tests/bodies/acp/fake_acp_agent.py,
one process per job, as every job starts its body) answers ``hello`` at once, so
the daemon's own per-job work (queue, session, store, policy gate, events, SSE) is
what is measured, thousands of times. Jobs are submitted in waves of ``--wave``
(``--parallel`` run at once: ``max_parallel_jobs``, 3 by default), each job on a new session
like ``chorus ask``.

    uv run python bench/bench_soak.py [--jobs 10000] [--warmup 1000] [--parallel 3] [--tracemalloc]

Prints the daemon's RSS every 1,000 jobs and the growth after warm-up, with the
number of objects the garbage collector tracks (live Python objects: a leak grows
it, allocator fragmentation does not); at the end the types that grew most after
warm-up, and the RSS before and after glibc's ``malloc_trim(0)`` (what the allocator
held without use). Each row also splits the RSS: anonymous memory, SQLite's own
(its page caches, bounded by ``cache_size`` per connection) and Python's allocated
blocks. With ``--trim`` each row also gives the RSS after ``malloc_trim(0)`` (as the
daemon does once idle after jobs). With ``--tracemalloc`` (slower) also the allocation
sites that grew most after warm-up. ``MALLOC_ARENA_MAX=2`` in the environment reaches
the daemon.

The requirement's figure comes last: the RSS at the warm-up's end (1,000 jobs) and at
the last job (5,000), both measured alike, idle: the bench waits ``--idle`` seconds
(the daemon's own idle trim, ``TRIM_DELAY_S`` after its last job, and a margin), checks
that the daemon did trim, then probes without trimming itself: what a person's daemon
holds between bursts. The rows above it are taken hot, right after a wave.

The body is a fake (the tiny ACP agent above), not a real CLI: what is measured is
the daemon, not a model. The config is the default but for notifications, the TCP
gateway and ``max_parallel_jobs``, so memory extraction runs after each job as it
does by default; with the fake it fails at the handshake (the agent has no ``plan``
mode), a logged error per job, instead of a model turn.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from chorus.daemon import is_responding, stop_daemon
from chorus.daemon._trim import TRIM_DELAY_S

ROOT = Path(__file__).resolve().parents[1]
AGENT = ROOT / "tests" / "bodies" / "acp" / "fake_acp_agent.py"
TERMINAL = {"succeeded", "failed", "cancelled"}
TARGET_PCT = 2.0  # the requirement: RSS after warm-up within 2% over the soak


def _config(home: Path, parallel: int) -> None:
    home.mkdir()
    (home / "config.toml").write_text(
        f"[daemon]\nnotifications = false\nmax_parallel_jobs = {parallel}\n"
        "[gateway]\ntcp = false\n"
        f"[agents.fake]\ncommand = {json.dumps(sys.executable)}\n"
        f'args = [{json.dumps(str(AGENT))}]\nprotocol = "acp"\n'
    )


def _start(home: Path, report: Path | None) -> subprocess.Popen[bytes]:
    argv = [sys.executable, str(ROOT / "bench" / "_soak_daemon.py")]
    argv += [str(report)] if report else []
    with (home / "daemon.log").open("ab") as log:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
    while not is_responding(0.5):
        assert proc.poll() is None, (home / "daemon.log").read_text()[-2000:]
        time.sleep(0.1)
    return proc


def _wave(client: httpx.Client, work: Path, size: int) -> int:
    """Submit ``size`` jobs, wait for all to end; return how many failed."""
    job = {"prompt": "hello", "body": "fake", "cwd": str(work)}
    ids = [client.post("/jobs", json=job).json()["id"] for _ in range(size)]
    failed = 0
    for job_id in ids:
        while (state := client.get(f"/jobs/{job_id}").json()["state"]) not in TERMINAL:
            time.sleep(0.05)
        failed += state != "succeeded"
    return failed


def _probe(proc: subprocess.Popen[bytes], folder: Path, trim: bool = False) -> dict[str, Any]:
    """The daemon's RSS and objects (``_soak_daemon.py``), optionally after a trim."""
    out = folder / "probe.json"
    out.unlink(missing_ok=True)
    (folder / "trim").unlink(missing_ok=True)
    if trim:
        (folder / "trim").touch()
    proc.send_signal(signal.SIGUSR2)
    deadline = time.monotonic() + 120
    while not out.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    return json.loads(out.read_text()) if out.exists() else {}


def _grown(base: dict[str, Any], now: dict[str, Any], top: int = 12) -> list[str]:
    """The types whose objects grew most from ``base`` to ``now``."""
    old, new = base.get("types", {}), now.get("types", {})
    diff = {name: n - old.get(name, 0) for name, n in new.items()}
    worst = sorted(diff.items(), key=lambda kv: -kv[1])[:top]
    return [f"{n:+8d}  {name}" for name, n in worst if n > 0]


def _snapshot(proc: subprocess.Popen[bytes], report: Path | None) -> None:
    if report is None:
        return
    report.unlink(missing_ok=True)
    proc.send_signal(signal.SIGUSR1)
    deadline = time.monotonic() + 300  # the snapshot blocks the daemon's loop meanwhile
    while not report.exists() and time.monotonic() < deadline:
        time.sleep(0.5)
    time.sleep(1.0)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--warmup", type=int, default=1_000)
    parser.add_argument("--wave", type=int, default=50)
    parser.add_argument("--tracemalloc", action="store_true")
    parser.add_argument("--trim", action="store_true", help="malloc_trim at each row")
    parser.add_argument("--parallel", type=int, default=3, help="[daemon] max_parallel_jobs")
    parser.add_argument(
        "--idle", type=float, default=TRIM_DELAY_S + 5, help="idle wait before the two figures"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="chorus-soak-") as tmp:
        home, work = Path(tmp) / "home", Path(tmp) / "work"
        work.mkdir()
        _config(home, args.parallel)
        os.environ["CHORUS_HOME"] = str(home)
        report = Path(tmp) / "tracemalloc.txt" if args.tracemalloc else None
        print(
            f"body: fake ACP agent ({AGENT.name}), one process per job; "
            f"MALLOC_ARENA_MAX={os.environ.get('MALLOC_ARENA_MAX', 'unset')}"
        )
        proc = _start(home, report)
        # A plain client with a long timeout: a tracemalloc snapshot stalls the daemon.
        transport = httpx.HTTPTransport(uds=str(home / "run" / "chorus.sock"))
        try:
            with httpx.Client(transport=transport, base_url="http://chorus", timeout=300) as client:
                _soak(proc, client, work, report, args, Path(tmp) if report else home)
        finally:
            stop_daemon()
        if report is not None:
            print("\nallocation sites that grew most after warm-up (tracemalloc):")
            print(report.read_text())


def _soak(proc, client, work, report, args, folder) -> None:  # type: ignore[no-untyped-def]
    started, done, failed = time.monotonic(), 0, 0
    base: dict[str, Any] = {}
    idle: list[dict[str, Any]] = []  # idle after the daemon's own trim: warm-up, end
    print(
        f"{'jobs':>7} {'RSS MB':>8} {'vs warm-up':>11} {'anon MB':>8} {'SQLite MB':>9}"
        f" {'py blocks':>10} {'objects':>9} {'vs warm-up':>11} {'jobs/s':>7} {'failed':>7}"
    )
    while done < args.jobs:
        failed += _wave(client, work, min(args.wave, args.jobs - done))
        done = min(done + args.wave, args.jobs)
        if done == args.warmup:
            base = _probe(proc, folder, args.trim)
            idle.append(_settled(proc, folder, args.idle))
            _snapshot(proc, report)  # idle too: no job's objects in flight
        if done % 1000 == 0 or done == args.jobs or done == args.warmup:
            now = base if done == args.warmup else _probe(proc, folder, args.trim)
            rate = done / (time.monotonic() - started)
            print(f"{done:>7} {_row(now, base)} {rate:>7.1f} {failed:>7}", flush=True)
            for line in now.get("grown", []):
                print(f"        grew: {line}", flush=True)
    idle.append(_settled(proc, folder, args.idle))
    _snapshot(proc, report)
    _ending(proc, folder, idle[0] if idle else base)  # idle against idle
    _verdict(idle, args.warmup, args.jobs)


def _settled(proc: subprocess.Popen[bytes], folder: Path, wait_s: float) -> dict[str, Any]:
    """The probe once idle ``wait_s``, after the daemon's own trim (counted since the
    last probe): no trim by the bench."""
    before = _probe(proc, folder).get("daemon_trims", 0)
    time.sleep(wait_s)
    now = _probe(proc, folder)
    now["trimmed_itself"] = now.get("daemon_trims", 0) > before
    return now


def _verdict(idle: list[dict[str, Any]], warmup: int, jobs: int) -> None:
    """The requirement's figure: idle RSS at warm-up's end and at the last job."""
    if len(idle) < 2:
        print(f"\nno figure: the warm-up ({warmup}) is not a multiple of the wave")
        return
    (first, last), mb = idle, 1 / 1024
    growth = (last["rss_kb"] / first["rss_kb"] - 1) * 100
    verdict = "ok" if growth <= TARGET_PCT else "OVER"
    trims = "" if first["trimmed_itself"] and last["trimmed_itself"] else " (a daemon trim MISSING)"
    print(
        f"\nRSS idle, after the daemon's own trim{trims}: {first['rss_kb'] * mb:.1f} MB at "
        f"{warmup:,} jobs (after warm-up), {last['rss_kb'] * mb:.1f} MB at {jobs:,} jobs: "
        f"{growth:+.1f}% (target <= {TARGET_PCT:g}%: {verdict})"
    )


def _row(now: dict[str, Any], base: dict[str, Any]) -> str:
    rss, objects = now["rss_kb"] / 1024, now["objects"]
    where = f"{now['anon_kb'] / 1024:>8.1f} {now['sqlite_kb'] / 1024:>9.1f} {now['py_blocks']:>10}"
    if not base:
        return f"{rss:>8.1f} {'-':>11} {where} {objects:>9} {'-':>11}"
    growth = (now["rss_kb"] / base["rss_kb"] - 1) * 100
    row = f"{rss:>8.1f} {growth:>+10.1f}% {where} {objects:>9} {objects - base['objects']:>+11d}"
    if "rss_after_trim_kb" in now:  # --trim: what an idle daemon keeps, after its trim
        trimmed = now["rss_after_trim_kb"]
        row += f"  trimmed {trimmed / 1024:.1f} MB"
        row += f" ({(trimmed / base['rss_after_trim_kb'] - 1) * 100:+.1f}%)"
    return row


def _ending(proc: subprocess.Popen[bytes], folder: Path, base: dict[str, Any]) -> None:
    now = _probe(proc, folder, trim=True)
    print("\nobject types that grew most after warm-up:")
    print("\n".join(_grown(base, now)) or "  none")
    before, after = now["rss_kb"] / 1024, now["rss_after_trim_kb"] / 1024
    print(
        f"\nRSS {before:.1f} MB; after malloc_trim(0) {after:.1f} MB "
        f"({after - before:+.1f} MB: held by the allocator, unused)"
    )


if __name__ == "__main__":
    main()
