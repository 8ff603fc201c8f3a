"""What the model-API meter adds: ``uv run python bench/bench_meter.py``.

Runs the meter as the daemon does (its own process, ``python -m chorus.meter``,
linked to this one, which answers its budget questions and takes its records like
the daemon; a secret known, so each request body is checked; with ``--budget`` each
request first asks this process whether it may go) in front of the
scripted model server, then sends ``--count`` streamed requests per API one after
another, straight to the server and through the meter, alternating, and prints for
each API and path the p50/p95 of the time to first byte and of the whole answer, and
what the meter adds (through minus straight, per percentile). The scripted server
runs in a thread of this process: the numbers are an upper bound of what the meter
costs a CLI talking to a remote provider.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import socket
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx

from chorus.bodies import Channel, channel_key
from chorus.meter import MeterHost, meter_url
from chorus.testing import ModelServer


def _streams() -> ModuleType:
    """``tests/meter/_streams.py`` (the tests are not an installed package)."""
    path = Path(__file__).parents[1] / "tests" / "meter" / "_streams.py"
    spec = importlib.util.spec_from_file_location("meter_streams", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


#: The streamed request of each API, shared with the meter's tests.
REQUESTS = _streams().STREAMED


def percentile(ordered: list[float], q: float) -> float:
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def one(client: httpx.AsyncClient, url: str, body: dict[str, object]) -> tuple[float, float]:
    """(time to first byte, whole answer) in ms."""
    start = time.perf_counter()
    first = 0.0
    async with client.stream("POST", url, json=body) as resp:
        async for _ in resp.aiter_raw():
            first = first or time.perf_counter()
    end = time.perf_counter()
    return (first - start) * 1000, (end - start) * 1000


def line(name: str, values: list[float]) -> str:
    ordered = sorted(values)
    p50, p95 = percentile(ordered, 0.5), percentile(ordered, 0.95)
    return f"{name:<28} p50 {p50:7.2f} ms   p95 {p95:7.2f} ms"


def _kept(record: dict[str, Any]) -> None:
    return None


async def run(count: int, run_dir: Path, ask: bool) -> None:
    secrets = {"K": "not-in-any-body"}
    host = MeterHost(run_dir, _kept, lambda c, a: None, lambda: secrets, budgets=lambda: ask)
    channel = Channel("127.0.0.1", host.open(), channel_key())
    host.start()
    await asyncio.wait_for(host.linked(), 60)
    # Like the CLIs' own HTTP clients (Node's, reqwest): no Nagle.
    nodelay = [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]
    transport = httpx.AsyncHTTPTransport(socket_options=nodelay)
    with ModelServer() as server:
        async with httpx.AsyncClient(timeout=30, transport=transport) as client:
            for api, (path, body) in REQUESTS.items():
                through = meter_url(channel, "bench", api, server.url) + path  # type: ignore[arg-type]
                results: dict[str, list[tuple[float, float]]] = {"straight": [], "meter": []}
                for _ in range(count):
                    results["straight"].append(await one(client, server.url + path, body))
                    results["meter"].append(await one(client, through, body))
                report(api, results)
    await host.close(keep=False)


def report(api: str, results: dict[str, list[tuple[float, float]]]) -> None:
    print(f"{api} ({len(results['meter'])} requests each way)")
    for index, what in ((0, "first byte"), (1, "whole answer")):
        straight = sorted(r[index] for r in results["straight"])
        metered = sorted(r[index] for r in results["meter"])
        print("  " + line(f"{what}, straight", straight))
        print("  " + line(f"{what}, through meter", metered))
        added = [percentile(metered, q) - percentile(straight, q) for q in (0.5, 0.95)]
        print(f"  {what + ', added':<28} p50 {added[0]:7.2f} ms   p95 {added[1]:7.2f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--count", type=int, default=200)
    parser.add_argument(
        "--budget", action="store_true", help="a budget is set: each request asks this process"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="chorus-bench-meter-") as home:
        os.environ["CHORUS_HOME"] = home
        (Path(home) / "run").mkdir()
        asyncio.run(run(args.count, Path(home) / "run", args.budget))


if __name__ == "__main__":
    main()
