"""Control-response latency of the UCP gateway: ``uv run python bench/bench_gateway_latency.py``.

Runs a gateway in a child process (TCP on a free loopback port, fresh store
in a temporary CHORUS_HOME) and one brain connection from this process, then
sends ``--count``
requests per subtype at a fixed ``--rate`` (open loop: each request leaves at
its scheduled time whatever the answers do, so a slow answer cannot hide the
queueing behind it) and prints p50/p95/p99/max of the time from the scheduled
send to the answer, per subtype:

* ``status (no session)``: answered by the gateway alone;
* ``status``: a session's status (one store read);
* ``mcp_status``: recorded in the log, then answered by the Claude CLI itself
  (only with the real ``claude`` installed; its body runs against the scripted
  model server, which this subtype never calls).

The gateway's rate limit and pending cap are raised for the run (the defaults,
100/s with a burst of 200 and 32 in flight, would answer a fast bench
``rate_limited``); every other setting is the default.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from chorus._errors import AgentNotFoundError
from chorus.agents import find_agent
from chorus.config import AgentConfig, ChorusConfig
from chorus.gateway import Gateway, GatewayConfig, GatewaySettings, UcpClient
from chorus.store import SqliteStore
from chorus.testing import ModelServer, offline_env

TOKEN = "bench-token-0123456789abcdef"


def percentile(ordered: list[float], q: float) -> float:
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def report(name: str, latencies_ms: list[float], errors: int) -> str:
    ordered = sorted(latencies_ms)
    if not ordered:
        return f"{name:<22} no answers ({errors} errors)"
    cols = [percentile(ordered, q) for q in (0.50, 0.95, 0.99)] + [ordered[-1]]
    p50, p95, p99, top = cols
    return (
        f"{name:<22} p50 {p50:7.2f} ms  p95 {p95:7.2f} ms  p99 {p99:7.2f} ms  "
        f"max {top:7.2f} ms  mean {statistics.fmean(ordered):6.2f} ms  "
        f"n={len(ordered)} errors={errors}"
    )


async def fire(brain: UcpClient, subtype: str, rate: float, count: int) -> tuple[list[float], int]:
    """Send ``count`` requests at ``rate``/s; return latencies (ms) and the error count."""
    loop = asyncio.get_running_loop()
    start = loop.time() + 0.05
    errors = 0

    async def one(i: int) -> float | None:
        nonlocal errors
        scheduled = start + i / rate
        await asyncio.sleep(max(0.0, scheduled - loop.time()))
        reply = await brain.call(subtype, timeout=30)
        if reply.response.subtype != "success":
            errors += 1
            return None
        return (loop.time() - scheduled) * 1000

    async with asyncio.TaskGroup() as tg:
        tasks = [tg.create_task(one(i)) for i in range(count)]
    return [t.result() for t in tasks if t.result() is not None], errors  # type: ignore[misc]


def claude_config(root: Path, server: ModelServer) -> ChorusConfig | None:
    try:
        find_agent("claude")
    except AgentNotFoundError:
        return None
    env = offline_env("claude", root / "claude-home", server.url)
    return ChorusConfig(agents={"claude": AgentConfig(env=env)})


async def serve_gateway() -> None:
    """The server half (a child process): run a gateway, print its URL, stop at stdin EOF."""
    with tempfile.TemporaryDirectory(prefix="chorus-bench-") as tmp, ModelServer() as server:
        root = Path(tmp)
        os.environ["CHORUS_HOME"] = str(root / "home")
        (root / "work").mkdir()
        config = claude_config(root, server)
        settings = GatewaySettings(
            gateway=GatewayConfig(
                port=0, token=TOKEN, rate_per_s=100_000, rate_burst=100_000, max_pending=10_000
            )
        )
        async with SqliteStore() as store:
            gateway = Gateway(store, config or ChorusConfig(), settings)
            async with gateway.running():
                ready = {"url": gateway.tcp_url, "work": str(root / "work"), "claude": bool(config)}
                print(json.dumps(ready), flush=True)
                await asyncio.to_thread(sys.stdin.read)  # until the parent closes our stdin


async def drive(ready: dict[str, Any], rate: float, count: int) -> list[str]:
    """The brain half: measure each subtype against the gateway in the child."""
    lines: list[str] = []
    async with UcpClient.connect(ready["url"], token=TOKEN) as brain:
        await fire(brain, "status", rate, min(count, 100))  # warm-up, not reported
        lines.append(report("status (no session)", *await fire(brain, "status", rate, count)))
        if not ready["claude"]:
            return [*lines, "claude CLI not installed: session subtypes skipped"]
        started = time.monotonic()
        await brain.request(
            "initialize", body="claude", cwd=ready["work"], timeout=120,
            permission_mode="bypassPermissions",
        )  # fmt: skip
        lines.append(f"{'initialize (claude)':<22} {time.monotonic() - started:.2f} s")
        for subtype in ("status", "mcp_status"):
            await fire(brain, subtype, rate, min(count, 20))  # warm-up
            lines.append(report(subtype, *await fire(brain, subtype, rate, count)))
    return lines


async def run(rate: float, count: int) -> list[str]:
    """Start the gateway in a child process (so the brain does not share its CPU time
    slice or event loop), then drive it from here."""
    child = await asyncio.create_subprocess_exec(
        sys.executable, __file__, "--serve",
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert child.stdin is not None
    assert child.stdout is not None
    try:
        ready = json.loads(await asyncio.wait_for(child.stdout.readline(), 60))
        return await drive(ready, rate, count)
    finally:
        child.stdin.close()
        await asyncio.wait_for(child.wait(), 60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--rate", type=float, default=200.0, help="requests per second")
    parser.add_argument("--count", type=int, default=2000, help="requests per subtype")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        asyncio.run(serve_gateway())
        return
    print(f"gateway control-response latency, {args.rate:g} req/s, {args.count} per subtype")
    for line in asyncio.run(run(args.rate, args.count)):
        print(line)


if __name__ == "__main__":
    main()
