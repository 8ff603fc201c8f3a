"""What the model-API meter adds: ``uv run python bench/bench_meter.py``.

Runs the meter as the daemon does (its own process, ``python -m chorus.meter``,
linked to this one, which answers its budget questions and takes its records like
the daemon; a secret known, so each request body is searched for it; with
``--budget`` a budget is set: the meter asks this process about the session once,
then goes by the verdicts it pushes after each record), then, in one
run, straight to an upstream and through the meter, alternating:

1. **Added latency per request**, per API: ``--count`` streamed requests with a
   body the size of a real CLI's (the whole conversation and the tools: about
   55 KB for Claude Code and Gemini CLI, 43 KB for Codex; made up here, or the
   captured ones with ``--bodies DIR``) to the scripted model server (a thread of
   this process; connections kept alive, as a provider's are); p50/p95 of the time
   to first byte and to the whole answer each way, what the meter adds (through
   minus straight, per percentile), the meter's CPU time per request and the load
   average while it ran. Target: p95 added <= 2 ms.
2. **Time to first byte with and without the meter** against an upstream that,
   like a provider, answers after ``--ttfb-ms`` (a small server in a process of
   its own); the ratio through/straight. Target: <= 1.05x.
3. **Throughput of a long stream**: ``--stream-mb`` MB of Responses API text
   deltas (1 KB each) from that upstream as fast as it writes, ``--streams`` times
   each way; MB/s each way and the ratio (the meter reads every event's usage).

The machine's load average is printed beside each figure: on a shared machine the
figures are only comparable at a similar load. ``--profile FILE`` runs the meter's
process under cProfile and prints where its time went.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import json
import os
import pstats
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
#: The size of a real CLI's request body mid-task (captured from the CLIs).
BODY_BYTES = {"anthropic": 56_000, "openai": 43_000, "gemini": 55_000}
#: The captured bodies' file names (``--bodies DIR``).
CAPTURED = {"anthropic": "req-claude.json", "openai": "req-codex.json", "gemini": "req-gemini.json"}
_TEXT = (
    "the tool reads a file in the workspace and returns its text so that the model can "
    "decide what to change next while keeping the user's instructions in mind"
)
_WORDS = _TEXT.split()


def _prose(size: int, seed: int) -> str:
    words = [_WORDS[(seed * 7 + i * 13) % len(_WORDS)] for i in range(size // 6 + 1)]
    return " ".join(words)[:size]


def _turn(api: str, n: int) -> list[dict[str, Any]]:
    """One step of a conversation in ``api``'s shape: a tool call and its output."""
    args = {"command": f"sed -n {n},{n + 40}p src/module_{n}.py"}
    out = _prose(900, n)
    if api == "anthropic":
        call = {"type": "tool_use", "id": f"toolu_{n}", "name": "Bash", "input": args}
        result = {"type": "tool_result", "tool_use_id": f"toolu_{n}", "content": out}
        return [
            {"role": "assistant", "content": [{"type": "text", "text": _prose(200, n)}, call]},
            {"role": "user", "content": [result]},
        ]
    if api == "openai":
        return [
            {
                "type": "function_call",
                "call_id": f"call_{n}",
                "name": "shell",
                "arguments": json.dumps(args),
            },
            {"type": "function_call_output", "call_id": f"call_{n}", "output": out},
        ]
    return [
        {"role": "model", "parts": [{"functionCall": {"name": "run_shell_command", "args": args}}]},
        {
            "role": "user",
            "parts": [
                {"functionResponse": {"name": "run_shell_command", "response": {"output": out}}}
            ],
        },
    ]


def _tools(api: str) -> list[dict[str, Any]]:
    schema = {"type": "object", "properties": {"command": {"type": "string"}}}
    named = [(f"tool_{i}", _prose(700, i)) for i in range(16)]
    if api == "anthropic":
        return [{"name": n, "description": d, "input_schema": schema} for n, d in named]
    if api == "openai":
        return [
            {"type": "function", "name": n, "description": d, "parameters": schema}
            for n, d in named
        ]
    return [
        {
            "functionDeclarations": [
                {"name": n, "description": d, "parameters": schema} for n, d in named
            ]
        }
    ]


def realistic_body(api: str, size: int) -> dict[str, Any]:
    """A streamed request of ``api`` as a CLI sends it mid-task, about ``size`` bytes."""
    _, small = REQUESTS[api]
    body: dict[str, Any] = dict(small)
    system = _prose(8000, 1)
    steps: list[dict[str, Any]] = []
    if api == "anthropic":
        body |= {"system": [{"type": "text", "text": system}], "tools": _tools(api)}
        first = [{"role": "user", "content": "fix the failing test"}]
    elif api == "openai":
        body |= {"instructions": system, "tools": _tools(api)}
        first = [{"role": "user", "content": [{"type": "input_text", "text": "fix it"}]}]
    else:
        body |= {"systemInstruction": {"parts": [{"text": system}]}, "tools": _tools(api)}
        first = [{"role": "user", "parts": [{"text": "fix the failing test"}]}]
    key = {"anthropic": "messages", "openai": "input", "gemini": "contents"}[api]
    n = 0
    while len(json.dumps(body | {key: first + steps})) < size:
        n += 1
        steps += _turn(api, n)
    return body | {key: first + steps}


def bodies(folder: Path | None) -> dict[str, bytes]:
    """Each API's request body: the captured ones in ``folder``, else made up."""
    if folder is not None:
        return {api: (folder / name).read_bytes() for api, name in CAPTURED.items()}
    return {api: json.dumps(realistic_body(api, BODY_BYTES[api])).encode() for api in REQUESTS}


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


_JSON = {"content-type": "application/json"}


async def one(client: httpx.AsyncClient, url: str, body: bytes) -> tuple[float, float]:
    """(time to first byte, whole answer) in ms."""
    start = time.perf_counter()
    first = 0.0
    async with client.stream("POST", url, content=body, headers=_JSON) as resp:
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
        self.cpu: list[float] = []
        self.bodies = bodies(args.bodies)

    def through(self, api: str, upstream: str) -> str:
        return meter_url(self.channel, "bench", api, upstream)  # type: ignore[arg-type]

    async def latency(self, server: ModelServer) -> None:
        print(
            "added latency per request: scripted server, kept-alive connections; "
            f"{self.args.count} requests each way per API, alternating"
        )
        print(_HEADER)
        added95: list[float] = []
        for api, (path, _) in REQUESTS.items():
            body = self.bodies[api]
            results: dict[str, list[tuple[float, float]]] = {"straight": [], "meter": []}
            cpu = cpu_ms(self.pid)
            for _ in range(self.args.count):
                results["straight"].append(await one(self.client, server.url + path, body))
                results["meter"].append(
                    await one(self.client, self.through(api, server.url) + path, body)
                )
            per = (cpu_ms(self.pid) - cpu) / self.args.count
            added95.append(report(api, len(body), results, per))
            self.cpu.append(per)
        cpu_line = f"meter CPU per request: {statistics.mean(self.cpu):.2f} ms (mean of the APIs)"
        self.verdicts.append(cpu_line)
        worst = max(added95)
        self.verdicts.append(
            _verdict("added per request, p95 (worst API)", worst, ADDED_P95_MS, "ms")
            + f" at load {os.getloadavg()[0]:.2f}"
        )

    async def ttfb(self, upstream: str) -> None:
        body = self.bodies["openai"]
        tail = f"/responses?ttfb={self.args.ttfb_ms}"
        through = self.through("openai", upstream) + tail
        straight, metered = [], []
        for _ in range(self.args.ttfb_count):
            straight.append((await one(self.client, upstream + tail, body))[0])
            metered.append((await one(self.client, through, body))[0])
        each = f"{len(straight)} each way, load {os.getloadavg()[0]:.2f}"
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


_HEADER = (
    f"{'api':<10}{'body':>7}  {'':<13}{'straight p50/p95':>18}{'through p50/p95':>18}"
    f"{'added p50/p95':>17}{'meter CPU':>11}{'load':>6}"
)


def report(api: str, size: int, results: dict[str, list[tuple[float, float]]], cpu: float) -> float:
    """Print one API's figures; the p95 the meter adds to the whole answer."""
    added95 = 0.0
    for index, what in ((0, "first byte"), (1, "whole answer")):
        straight = sorted(r[index] for r in results["straight"])
        metered = sorted(r[index] for r in results["meter"])
        s50, s95 = percentile(straight, 0.5), percentile(straight, 0.95)
        m50, m95 = percentile(metered, 0.5), percentile(metered, 0.95)
        added95 = m95 - s95
        head = f"{api:<10}{size / 1000:>5.0f}KB" if index == 0 else " " * 17
        print(
            f"{head}  {what:<13}{s50:>8.2f}/{s95:<6.2f}ms{m50:>9.2f}/{m95:<6.2f}ms"
            f"{m50 - s50:>8.2f}/{added95:<6.2f}ms{cpu:>8.2f} ms{os.getloadavg()[0]:>6.2f}"
        )
    return added95


def _verdict(what: str, value: float, target: float, unit: str) -> str:
    mark = "ok" if value <= target else "OVER"
    return f"{what}: {value:.3f} {unit} (target <= {target:g} {unit}) {mark}"


async def run(args: argparse.Namespace, run_dir: Path) -> None:
    secrets = {"K": "not-in-any-body"}
    host = MeterHost(
        run_dir, _kept, lambda c, a: None, lambda: secrets, budgets=lambda: args.budget
    )
    if args.profile is not None:
        profiled(host, args.profile)
    channel = Channel("127.0.0.1", host.open(), channel_key())
    host.start()
    await asyncio.wait_for(host.linked(), 60)
    print(f"start: {load()}")
    # Like the CLIs' own HTTP clients (Node's, reqwest): no Nagle.
    nodelay = [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]
    transport = httpx.AsyncHTTPTransport(socket_options=nodelay)
    # A provider keeps its connections alive (the scripted server does so only for
    # the Anthropic API unless asked): so does the meter's pool, and the client here.
    with ModelServer(keep_alive=True) as server, provider_upstream() as upstream:
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
    if args.profile is not None:
        _top(args.profile)


#: The meter's process under cProfile timed by its CPU (not the wall clock: on a busy
#: machine the wall clock blames whatever call the process was preempted in).
_PROFILED = """
import cProfile, sys, time
from chorus.meter._process import main
profile = cProfile.Profile(time.process_time)
try:
    profile.runcall(main, sys.argv[2:])
finally:
    profile.dump_stats(sys.argv[1])
"""


def profiled(host: MeterHost, out: Path) -> None:
    """Start ``host``'s meter process under cProfile, writing ``out`` when it exits."""

    def spawn(sock: socket.socket) -> subprocess.Popen[bytes]:
        fd = sock.fileno()
        where = [str(host.run_dir), str(fd), str(host.orphan_s)]
        args = [sys.executable, "-c", _PROFILED, str(out), *where]
        return subprocess.Popen(args, pass_fds=(fd,), stdin=subprocess.DEVNULL)

    host._spawn = spawn  # type: ignore[method-assign]


def _top(out: Path) -> None:
    """The meter's process's costliest functions (their own CPU time, its start
    excluded); it has exited (``host.close`` waits for it), its profile written."""
    print(f"meter process profile ({out}), by own CPU time:")
    pstats.Stats(str(out)).sort_stats("tottime").print_stats(20)


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
        "--budget", action="store_true", help="a budget is set (its verdicts pushed)"
    )
    parser.add_argument(
        "--bodies", type=Path, help=f"a folder with captured bodies: {', '.join(CAPTURED.values())}"
    )
    parser.add_argument("--profile", type=Path, help="run the meter's process under cProfile")
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
