"""kill -9 the daemon the instant a job's end committed, N times; count the watches
that still end.

Each round starts a daemon that SIGKILLs itself right after the transaction that
moved its job to ``succeeded`` (``tests/faults.py kill-after-job-end``),
runs one real Claude Code job against the scripted model, then ``chorus watch``
(which starts a fresh daemon) must end with the job's JobEnded. A Chorus that
writes the state and the JobEnded in two transactions leaves the watch waiting.

    uv run python bench/bench_kill_at_completion.py [--rounds 50]
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
from pathlib import Path

from _common import bench_home

from chorus.daemon import stop_daemon
from chorus.testing import text

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository: tests/
from tests.faults import start_faulty_daemon


def _round(n: int, server, work: Path, root: Path) -> tuple[bool, bool]:  # type: ignore[no-untyped-def]
    """(killed at the instant, watch ended with exit 0) for one job."""
    server.script([text(f"round {n} done")], lane="claude")
    proc = start_faulty_daemon("kill-after-job-end", root / "faulty.log")
    chorus = [sys.executable, "-m", "chorus"]
    env = os.environ.copy()
    job = subprocess.run(
        [*chorus, "task", f"round {n}", "--body", "claude"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
    )
    killed = proc.wait(timeout=120) == -signal.SIGKILL
    try:
        watch = subprocess.run(
            [*chorus, "watch", job.stdout.strip()],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=25,
        )
        ended = watch.returncode == 0 and f"round {n} done" in watch.stdout
    except subprocess.TimeoutExpired:
        ended = False
    stop_daemon()
    return killed, ended


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=50)
    args = parser.parse_args()
    with bench_home(("claude",)) as (server, work, root):
        rounds = [_round(n, server, work, root) for n in range(args.rounds)]
    killed = sum(k for k, _ in rounds)
    ended = sum(e for _, e in rounds)
    print(f"daemon killed right after a job's end : {killed}/{args.rounds}")
    print(f"watches that ended (job's end in log) : {ended}/{args.rounds}")


if __name__ == "__main__":
    main()
