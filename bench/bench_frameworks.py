"""`--framework consensus` (three planners in parallel, then one executor) against
`direct`, on the scripted model with slow streams, side by side in one run.

The target: consensus wall time <= direct + 1.3 x the slowest single
planner, which holds only if the planners really run in parallel.

    uv run python bench/bench_frameworks.py [--rounds N] [--delay SECONDS]
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from _common import bench_home, summary

from chorus.daemon import DaemonClient, spawn_daemon
from chorus.testing import ModelServer, slow_text

PLAN = '{"summary": "plan", "steps": ["write the answer", "check it"]}'
BODIES = ("claude", "codex", "gemini")


def _slow(content: str, delay: float) -> Any:
    return slow_text(content, chunks=10, delay=delay / 10)


def _run(client: DaemonClient, work: str, **fields: Any) -> float:
    started = time.perf_counter()
    job = client.submit(prompt="answer the question", cwd=work, **fields)
    while client.job(job["id"])["state"] not in ("succeeded", "failed", "cancelled"):
        time.sleep(0.05)
    elapsed = time.perf_counter() - started
    assert client.job(job["id"])["state"] == "succeeded", client.job(job["id"])
    return elapsed


def _round(client: DaemonClient, server: ModelServer, work: str, delay: float) -> list[float]:
    server.script([_slow("direct answer", delay)], lane="claude")
    direct = _run(client, work, body="claude")
    server.script([_slow(PLAN, delay)], lane="gemini")
    planner = _run(client, work, body="gemini", permission_mode="plan")
    server.script([_slow(PLAN, delay), _slow("executed", delay)], lane="claude")
    for lane in ("codex", "gemini"):
        server.script([_slow(PLAN, delay)], lane=lane)
    consensus = _run(client, work, body="claude", framework="consensus")
    return [direct, planner, consensus]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--delay", type=float, default=2.0, help="seconds each reply streams")
    args = parser.parse_args()
    samples: list[list[float]] = []
    with bench_home(BODIES, extra="max_parallel_jobs = 4") as (server, work, _root):
        spawn_daemon()
        client = DaemonClient()
        for _ in range(args.rounds):
            samples.append(_round(client, server, str(work), args.delay))
    direct, planner, consensus = (sorted(col)[len(col) // 2] for col in zip(*samples, strict=True))
    bound = direct + 1.3 * planner
    print(f"direct (one body)      : {summary([s[0] for s in samples])}")
    print(f"one planner alone      : {summary([s[1] for s in samples])}")
    print(f"consensus (3 planners) : {summary([s[2] for s in samples])}")
    print(
        f"consensus / (direct + 1.3 x planner) = {consensus:.2f}s / {bound:.2f}s = "
        f"{consensus / bound:.2f} (target <= 1.00)"
    )


if __name__ == "__main__":
    main()
