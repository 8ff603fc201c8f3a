"""What the model-API meter adds: ``uv run python bench/bench_meter.py``.

Serves the meter as the daemon does (a route of the sessions' channel listener on
loopback, in this process's event loop) in front of the scripted model server, then
sends ``--count`` streamed requests per API one after another, straight to the
server and through the meter, alternating, and prints for each API and path the
p50/p95 of the time to first byte and of the whole answer, and what the meter adds
(through minus straight, per percentile). The scripted server runs in a thread of
this process, so both paths share one interpreter: the numbers are an upper bound
of what the meter costs a CLI talking to a remote provider.
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

import httpx

from chorus.bodies import channel_key
from chorus.mcpserver import channel_running
from chorus.meter import MeterApp, meter_url
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


async def run(count: int) -> None:
    meter = MeterApp(channel_key())
    # Like the CLIs' own HTTP clients (Node's, reqwest): no Nagle.
    nodelay = [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]
    transport = httpx.AsyncHTTPTransport(socket_options=nodelay)
    with ModelServer() as server:
        async with (
            channel_running(None, None, {"meter": meter}) as channel,
            httpx.AsyncClient(timeout=30, transport=transport) as client,
        ):
            for api, (path, body) in REQUESTS.items():
                through = meter_url(channel, "bench", api, server.url) + path  # type: ignore[arg-type]
                results: dict[str, list[tuple[float, float]]] = {"straight": [], "meter": []}
                for _ in range(count):
                    results["straight"].append(await one(client, server.url + path, body))
                    results["meter"].append(await one(client, through, body))
                report(api, results)
        await meter.close()


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
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="chorus-bench-meter-") as home:
        os.environ["CHORUS_HOME"] = home
        (Path(home) / "run").mkdir()
        asyncio.run(run(args.count))


if __name__ == "__main__":
    main()
