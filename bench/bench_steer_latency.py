"""Steer latency: from `POST /jobs/{id}/steer` returning to the body having the text.

Each round starts a job whose turn runs a slow shell command, waits until the
tool runs, steers it, and reads the body's stdin from the store's raw lines
(each stamped when the transport wrote it). Printed per body:

* native (Codex `turn/steer`): the steer line written to the CLI's stdin;
* emulated (Claude, Gemini): the interrupt written, then the steer text as the
  next turn's prompt.

Latency is "written to stdin" minus "command returned", floored at 0 (a native
steer is written before the command returns).

    uv run python bench/bench_steer_latency.py [--body codex,claude] [--rounds N]
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

from _common import bench_home

from chorus.daemon import DaemonClient, spawn_daemon
from chorus.events import ToolCall
from chorus.store import SqliteStore
from chorus.testing import shell, text


def _until(check: Any, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError("condition not met")
        time.sleep(0.02)


def _tool_running(client: DaemonClient, job_id: str) -> bool:
    return any(isinstance(e, ToolCall) for e in client.events(job_id, follow=False))


async def _stdin_times(session_id: str, marker: str) -> tuple[float | None, float | None]:
    """When the first stdin line was written after the steer, and the first with
    ``marker`` in it."""
    store = SqliteStore()
    await store.start()
    try:
        lines = await store.read_raw(session_id, streams=["stdin"])
    finally:
        await store.close()
    return (lines[-1].ts if lines else None), next((r.ts for r in lines if marker in r.line), None)


def _round(client: DaemonClient, body: str, n: int) -> tuple[float, float, float]:
    job = client.submit(prompt="count", body=body)
    _until(lambda: _tool_running(client, job["id"]))
    marker = f"steer-marker-{n}"
    before = time.time()
    answer = client.steer(job["id"], marker)
    returned = time.time()
    _until(lambda: client.job(job["id"])["state"] in ("succeeded", "failed", "cancelled"), 120)
    session = client.job(job["id"])["session_id"]
    first, with_text = asyncio.run(_stdin_times(session, marker))
    assert with_text is not None, f"the steer never reached {body}'s stdin ({answer})"
    first_after = first if first is not None and first >= before else with_text
    return max(0.0, first_after - returned), max(0.0, with_text - returned), with_text - before


def _p95(samples: list[float]) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--body", default="codex,claude")
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    bodies = tuple(args.body.split(","))
    print(
        f"{'body':8} {'first write p50/p95 ms':>24} {'steer text p50/p95 ms':>24}  (after return)"
    )
    for body in bodies:
        with bench_home((body,)) as (server, _work, _root):
            server.script([shell("sleep 3"), text("ok")] * args.rounds * 2, lane=body)
            spawn_daemon()
            client = DaemonClient()
            rows = [_round(client, body, n) for n in range(args.rounds)]
        firsts, texts, sends = (list(col) for col in zip(*rows, strict=True))
        p50 = sorted(firsts)[len(firsts) // 2] * 1000
        t50 = sorted(texts)[len(texts) // 2] * 1000
        print(
            f"{body:8} {p50:>11.1f} / {_p95(firsts) * 1000:<10.1f} "
            f"{t50:>11.1f} / {_p95(texts) * 1000:<10.1f}"
        )
        s50 = sorted(sends)[len(sends) // 2] * 1000
        s95 = _p95(sends) * 1000
        print(f"{'':8} (command start -> steer on stdin: p50 {s50:.1f} ms, p95 {s95:.1f} ms)")


if __name__ == "__main__":
    main()
