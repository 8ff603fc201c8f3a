"""Daemon memory over a long soak: RSS per 1,000 jobs, and what grows (tracemalloc).

Each job is a fast scripted one: a tiny ACP agent (tests/bodies/acp/fake_acp_agent.py,
one process per job, as every job starts its body) answers ``hello`` at once, so
the daemon's own per-job work (queue, session, store, policy gate, events, SSE) is
what is measured, thousands of times. Jobs are submitted in waves of ``--wave``
(3 run at once, the default ``max_parallel_jobs``), each job on a new session
like ``chorus ask``.

    uv run python bench/bench_soak.py [--jobs 10000] [--warmup 1000] [--tracemalloc]

Prints the daemon's RSS every 1,000 jobs and the growth after warm-up; with
``--tracemalloc`` (slower) also the allocation sites that grew most after warm-up.
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

import httpx

from chorus.daemon import is_responding, stop_daemon

ROOT = Path(__file__).resolve().parents[1]
AGENT = ROOT / "tests" / "bodies" / "acp" / "fake_acp_agent.py"
TERMINAL = {"succeeded", "failed", "cancelled"}


def _config(home: Path) -> None:
    home.mkdir()
    (home / "config.toml").write_text(
        "[daemon]\nnotifications = false\n[gateway]\ntcp = false\n"
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


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


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
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="chorus-soak-") as tmp:
        home, work = Path(tmp) / "home", Path(tmp) / "work"
        work.mkdir()
        _config(home)
        os.environ["CHORUS_HOME"] = str(home)
        report = Path(tmp) / "tracemalloc.txt" if args.tracemalloc else None
        proc = _start(home, report)
        # A plain client with a long timeout: a tracemalloc snapshot stalls the daemon.
        transport = httpx.HTTPTransport(uds=str(home / "run" / "chorus.sock"))
        try:
            with httpx.Client(transport=transport, base_url="http://chorus", timeout=300) as client:
                _soak(proc, client, work, report, args)
        finally:
            stop_daemon()
        if report is not None:
            print("\nallocation sites that grew most after warm-up (tracemalloc):")
            print(report.read_text())


def _soak(proc, client, work, report, args) -> None:  # type: ignore[no-untyped-def]
    started, done, failed = time.monotonic(), 0, 0
    after_warmup: float | None = None
    print(f"{'jobs':>7} {'RSS MB':>8} {'vs warm-up':>11} {'jobs/s':>7} {'failed':>7}")
    while done < args.jobs:
        failed += _wave(client, work, min(args.wave, args.jobs - done))
        done = min(done + args.wave, args.jobs)
        if done == args.warmup:
            _snapshot(proc, report)
        if done % 1000 == 0 or done == args.jobs:
            rss = _rss_mb(proc.pid)
            if done >= args.warmup and after_warmup is None:
                after_warmup = rss
            growth = f"{(rss / after_warmup - 1) * 100:+.1f}%" if after_warmup else "-"
            rate = done / (time.monotonic() - started)
            print(f"{done:>7} {rss:>8.1f} {growth:>11} {rate:>7.1f} {failed:>7}", flush=True)
    _snapshot(proc, report)


if __name__ == "__main__":
    main()
