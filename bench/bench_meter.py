"""What the model-API meter adds: ``uv run python bench/bench_meter.py``.

Runs the meter as the daemon does (its own process, ``python -m chorus.meter``,
linked to this one, which answers its budget questions and takes its records like
the daemon; a secret known, so each request body is checked; with ``--budget`` each
request first asks this process whether it may go), then, in one run, straight to
an upstream and through the meter, alternating:

1. **Added latency per request**, per API: ``--count`` streamed requests to the
   scripted model server (a thread of this process); p50/p95 of the time to first
   byte and of the whole answer each way, and what the meter adds (through minus
   straight, per percentile). Target: p95 added <= 2 ms.
2. **Time to first byte with and without the meter** against an upstream that,
   like a provider, answers after ``--ttfb-ms`` (a small server in a process of
   its own); the ratio through/straight. Target: <= 1.05x. (Against the scripted
   server, whose first byte takes about a millisecond, the ratio of part 1 is the
   meter's fixed cost over almost nothing: it is printed too, as the worst case.)
3. **Throughput of a long stream**: ``--stream-mb`` MB of Responses API text
   deltas (1 KB each) from that upstream as fast as it writes, ``--streams`` times
   each way; MB/s each way and the ratio (the meter reads every event's usage).

The machine's load (``uptime``) is printed at the start and the end: the figures
are only comparable at a similar load.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx

from chorus.bodies import Channel, channel_key
from chorus.meter import MeterHost, meter_url
from chorus.testing import ModelServer

#: Targets of the issue that asked for the meter.
ADDED_P95_MS = 2.0
TTFB_RATIO = 1.05
#: One Responses API text delta of the long stream (about 1 KB).
_DELTA = (
    "event: response.output_text.delta\n"
    'data: {"type":"response.output_text.delta","item_id":"msg_1","output_index":0,'
    '"content_index":0,"delta":"' + "x" * 960 + '"}\n\n'
).encode()


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


def cpu_ms(pid: int) -> float:
    """The CPU time (user and system) process ``pid`` has used, in ms (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f}, {five:.2f}, {fifteen:.2f} ({os.cpu_count()} cores)"


# -- the provider-like upstream (its own process: ``--serve-upstream``) -------------------


def _completed() -> bytes:
    usage = {"input_tokens": 100, "output_tokens": 20, "total_tokens": 120}
    data = {"type": "response.completed", "response": {"id": "r1", "usage": usage}}
    return f"event: response.completed\ndata: {json.dumps(data)}\n\n".encode()


def _head(length: int) -> bytes:
    return (
        f"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {length}\r\n\r\n"
    ).encode()


async def _answer(writer: asyncio.StreamWriter, target: str) -> None:
    """``?ttfb=<ms>``: a short stream after that long; ``?mb=<n>``: n MB of deltas."""
    query = parse_qs(urlsplit(target).query)
    if "mb" in query:
        await _long(writer, float(query["mb"][0]))
        return
    await asyncio.sleep(float(query.get("ttfb", ["0"])[0]) / 1000)
    body = _DELTA + _completed()
    writer.write(_head(len(body)) + body)
    await writer.drain()


async def _long(writer: asyncio.StreamWriter, mb: float) -> None:
    block = _DELTA * 64
    count = max(1, round(mb * (1 << 20) / len(block)))
    tail = _completed()
    writer.write(_head(count * len(block) + len(tail)))
    for _ in range(count):
        writer.write(block)
        await writer.drain()
    writer.write(tail)
    await writer.drain()


async def _connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
        while True:
            head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
            length = next(
                (
                    int(h.split(":", 1)[1])
                    for h in head.split("\r\n")
                    if h.lower().startswith("content-length:")
                ),
                0,
            )
            await reader.readexactly(length)
            await _answer(writer, head.split(" ", 2)[1])
    writer.close()


async def _serve_upstream() -> None:
    server = await asyncio.start_server(_connection, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    async with server:
        await server.serve_forever()


@contextlib.contextmanager
def provider_upstream() -> Iterator[str]:
    """The provider-like upstream's base URL, its process stopped on the way out."""
    child = subprocess.Popen(
        [sys.executable, __file__, "--serve-upstream"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None
        yield f"http://127.0.0.1:{int(child.stdout.readline())}/v1"
    finally:
        child.terminate()
        child.wait(10)


# -- measuring -------------------------------------------------------------------------------


async def one(client: httpx.AsyncClient, url: str, body: dict[str, object]) -> tuple[float, float]:
    """(time to first byte, whole answer) in ms."""
    start = time.perf_counter()
    first = 0.0
    async with client.stream("POST", url, json=body) as resp:
        async for _ in resp.aiter_raw():
            first = first or time.perf_counter()
    end = time.perf_counter()
    return (first - start) * 1000, (end - start) * 1000


async def mb_per_s(client: httpx.AsyncClient, url: str, body: dict[str, object]) -> float:
    start = time.perf_counter()
    size = 0
    async with client.stream("POST", url, json=body) as resp:
        assert resp.status_code == 200, resp.status_code
        async for chunk in resp.aiter_raw():
            size += len(chunk)
    return size / (1 << 20) / (time.perf_counter() - start)


def line(name: str, values: list[float]) -> str:
    ordered = sorted(values)
    p50, p95 = percentile(ordered, 0.5), percentile(ordered, 0.95)
    return f"{name:<28} p50 {p50:7.2f} ms   p95 {p95:7.2f} ms"


def _kept(record: dict[str, Any]) -> None:
    return None


class Bench:
    """The three parts, through one meter and one client."""

    def __init__(
        self, client: httpx.AsyncClient, channel: Channel, args: argparse.Namespace, pid: int
    ):
        self.client, self.channel, self.args, self.pid = client, channel, args, pid
        self.verdicts: list[str] = []

    def through(self, api: str, upstream: str) -> str:
        return meter_url(self.channel, "bench", api, upstream)  # type: ignore[arg-type]

    async def latency(self, server: ModelServer) -> None:
        added95: list[float] = []
        cpu = cpu_ms(self.pid)
        for api, (path, body) in REQUESTS.items():
            results: dict[str, list[tuple[float, float]]] = {"straight": [], "meter": []}
            for _ in range(self.args.count):
                results["straight"].append(await one(self.client, server.url + path, body))
                results["meter"].append(
                    await one(self.client, self.through(api, server.url) + path, body)
                )
            added95.append(report(api, results))
        per = (cpu_ms(self.pid) - cpu) / (self.args.count * len(REQUESTS))
        print(f"meter process CPU per request: {per:.2f} ms (user + system, any load)")
        self.verdicts.append(f"meter CPU per request: {per:.2f} ms")
        worst = max(added95)
        self.verdicts.append(
            _verdict("added per request, p95 (worst API)", worst, ADDED_P95_MS, "ms")
        )

    async def ttfb(self, upstream: str) -> None:
        _, body = REQUESTS["openai"]
        tail = f"/responses?ttfb={self.args.ttfb_ms}"
        through = self.through("openai", upstream) + tail
        straight, metered = [], []
        for _ in range(self.args.ttfb_count):
            straight.append((await one(self.client, upstream + tail, body))[0])
            metered.append((await one(self.client, through, body))[0])
        each = f"{len(straight)} each way"
        print(f"first byte, upstream answering after {self.args.ttfb_ms:g} ms ({each})")
        print("  " + line("straight", straight))
        print("  " + line("through meter", metered))
        for q, name in ((0.5, "p50"), (0.95, "p95")):
            ratio = percentile(sorted(metered), q) / percentile(sorted(straight), q)
            self.verdicts.append(
                _verdict(f"first byte with/without, {name}", ratio, TTFB_RATIO, "x")
            )

    async def long_stream(self, upstream: str) -> None:
        _, body = REQUESTS["openai"]
        url = f"/responses?mb={self.args.stream_mb}"
        straight, metered = [], []
        for _ in range(self.args.streams):
            straight.append(await mb_per_s(self.client, upstream + url, body))
            metered.append(
                await mb_per_s(self.client, self.through("openai", upstream) + url, body)
            )
        s, m = statistics.median(straight), statistics.median(metered)
        each = f"{len(straight)} each way, median"
        print(f"long stream: {self.args.stream_mb:g} MB of 1 KB deltas ({each})")
        print(f"  straight {s:8.1f} MB/s   through meter {m:8.1f} MB/s   ratio {m / s:.2f}")
        self.verdicts.append(f"long stream through/straight: {m / s:.2f} ({m:.0f} MB/s through)")


def report(api: str, results: dict[str, list[tuple[float, float]]]) -> float:
    """Print one API's figures; the p95 the meter adds to the whole answer."""
    print(f"{api} ({len(results['meter'])} requests each way)")
    added95 = 0.0
    for index, what in ((0, "first byte"), (1, "whole answer")):
        straight = sorted(r[index] for r in results["straight"])
        metered = sorted(r[index] for r in results["meter"])
        print("  " + line(f"{what}, straight", straight))
        print("  " + line(f"{what}, through meter", metered))
        added = [percentile(metered, q) - percentile(straight, q) for q in (0.5, 0.95)]
        print(f"  {what + ', added':<28} p50 {added[0]:7.2f} ms   p95 {added[1]:7.2f} ms")
        ratio = percentile(metered, 0.5) / percentile(straight, 0.5)
        print(f"  {what + ', ratio p50':<28} {ratio:.2f}x (scripted server: its own time is ~0)")
        added95 = added[1]
    return added95


def _verdict(what: str, value: float, target: float, unit: str) -> str:
    mark = "ok" if value <= target else "OVER"
    return f"{what}: {value:.3f} {unit} (target <= {target:g} {unit}) {mark}"


async def run(args: argparse.Namespace, run_dir: Path) -> None:
    secrets = {"K": "not-in-any-body"}
    host = MeterHost(
        run_dir, _kept, lambda c, a: None, lambda: secrets, budgets=lambda: args.budget
    )
    channel = Channel("127.0.0.1", host.open(), channel_key())
    host.start()
    await asyncio.wait_for(host.linked(), 60)
    print(f"start: {load()}")
    # Like the CLIs' own HTTP clients (Node's, reqwest): no Nagle.
    nodelay = [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]
    transport = httpx.AsyncHTTPTransport(socket_options=nodelay)
    with ModelServer() as server, provider_upstream() as upstream:
        async with httpx.AsyncClient(timeout=120, transport=transport) as client:
            pid = int(json.loads((run_dir / "meter" / "pid").read_text())["pid"])
            bench = Bench(client, channel, args, pid)
            await bench.latency(server)
            await bench.ttfb(upstream)
            await bench.long_stream(upstream)
    await host.close(keep=False)
    print(f"end: {load()}")
    print("summary:")
    for verdict in bench.verdicts:
        print("  " + verdict)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--count", type=int, default=200, help="requests per API and way (part 1)")
    parser.add_argument(
        "--ttfb-ms", type=float, default=250.0, help="the upstream's first byte (part 2)"
    )
    parser.add_argument("--ttfb-count", type=int, default=40, help="requests per way (part 2)")
    parser.add_argument(
        "--stream-mb", type=float, default=64.0, help="size of the long stream (part 3)"
    )
    parser.add_argument("--streams", type=int, default=3, help="long streams per way (part 3)")
    parser.add_argument(
        "--budget", action="store_true", help="a budget is set: each request asks this process"
    )
    parser.add_argument("--serve-upstream", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_upstream:
        asyncio.run(_serve_upstream())
        return
    with tempfile.TemporaryDirectory(prefix="chorus-bench-meter-") as home:
        os.environ["CHORUS_HOME"] = home
        (Path(home) / "run").mkdir()
        asyncio.run(run(args, Path(home) / "run"))


if __name__ == "__main__":
    main()
