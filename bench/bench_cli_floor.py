"""What each CLI itself costs for what Chorus asks of it, measured on the CLI alone.

No daemon, no sandbox, no `chorus` client: the pinned CLI, driven by this script
against the scripted model server, each variant side by side in one run (medians of
``--rounds``, the variants interleaved):

* claude: from the process's start to its first model request, as ``claude -p``
  (the bare one-shot), as a live session (stream-json in, the control protocol's
  ``initialize`` answered first), and as a live session given one MCP server: over
  HTTP (a loopback server answering at once) or in-band (its ``mcp_message`` control
  requests answered at once by this script), which is how Chorus gives a live
  Claude its tools. Ratios against the bare one-shot.
* codex: a warm turn (a shell command, then an answer) of Chorus's Codex body
  alone, with the flags a daemon gives it (its commands asked for, Codex's own
  sandbox off inside Chorus's), against the bare CLI's own follow-up
  (``codex exec resume``).

What lies between these and ``bench_ask_vs_bare.py`` is Chorus's own: the client,
the daemon, the policy, the log and the sandbox.

    uv run python bench/bench_cli_floor.py [--rounds N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from chorus.agents import find_agent
from chorus.bodies import BodyOptions
from chorus.bodies.codex import CodexBody
from chorus.testing import ModelServer, headless_argv, offline_env, shell, text

LIVE = (
    "--input-format", "stream-json", "--output-format", "stream-json", "--verbose",
    "--include-partial-messages", "--permission-prompt-tool", "stdio",
    "--permission-mode", "bypassPermissions",
)  # fmt: skip
INIT = {"type": "control_request", "request_id": "i1", "request": {"subtype": "initialize"}}
USER = {
    "type": "user",
    "message": {"role": "user", "content": "say hi"},
    "parent_tool_use_id": None,
    "session_id": "default",
}
TOOLS = [{"name": "hello", "description": "Say hi.", "inputSchema": {"type": "object"}}]
SCENARIO = [shell("echo hi > out.txt"), text("done")]


def mcp_reply(message: dict[str, Any]) -> dict[str, Any] | None:
    """A minimal MCP server's answer to ``message`` (None for a notification)."""
    if "id" not in message:
        return None
    params = message.get("params") or {}
    results: dict[str, Any] = {
        "initialize": {
            "protocolVersion": params.get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "chorus", "version": "1"},
        },
        "tools/list": {"tools": TOOLS},
    }
    return {"jsonrpc": "2.0", "id": message["id"], "result": results.get(message["method"], {})}


class _McpHandler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        reply = mcp_reply(json.loads(body))
        data = json.dumps(reply).encode() if reply is not None else b""
        self.send_response(200 if reply is not None else 202)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self.send_response(405)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def http_mcp() -> Iterator[str]:
    """A loopback MCP server over HTTP for the block: its URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _McpHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/mcp"
    finally:
        server.shutdown()


def first_request(server: ModelServer, argv: list[str], env: dict[str, str], cwd: Path) -> float:
    """Seconds from the CLI's start to its first model request (its turn then ends)."""
    server.script([text("hi")], lane="floor")
    before = len(server.turn_requests(lane="floor"))
    started = time.time()  # the server stamps requests with the wall clock
    live = "--input-format" in argv
    proc = subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdin=subprocess.PIPE if live else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        text=True,
    )
    if live:
        _drive(proc)
    else:
        proc.communicate()
    stamps = [r.timestamp for r in server.turn_requests(lane="floor")[before:]]
    return min(stamps) - started


def _drive(proc: subprocess.Popen[str]) -> None:
    """Speak the control protocol: ``initialize`` first, then one message; answer each
    ``mcp_message`` at once; stop at the turn's result."""
    assert proc.stdin is not None
    assert proc.stdout is not None

    def send(line: dict[str, Any]) -> None:
        assert proc.stdin is not None
        proc.stdin.write(json.dumps(line) + "\n")
        proc.stdin.flush()

    send(INIT)
    for raw in proc.stdout:
        line = json.loads(raw)
        if line.get("type") == "control_response" and line["response"]["request_id"] == "i1":
            send(USER)
        elif line.get("type") == "control_request":
            message = line["request"].get("message", {})
            response = {"mcp_response": mcp_reply(message) or {"jsonrpc": "2.0", "result": {}}}
            answer = {"subtype": "success", "request_id": line["request_id"], "response": response}
            send({"type": "control_response", "response": answer})
        elif line.get("type") == "result":
            break
    proc.stdin.close()
    proc.wait()


def claude_variants(exe: str, url: str) -> dict[str, list[str]]:
    def with_mcp(spec: dict[str, Any]) -> list[str]:
        config = json.dumps({"mcpServers": {"chorus": spec}})
        return [exe, "-p", *LIVE, "--mcp-config", config, "--strict-mcp-config"]

    return {
        "bare one-shot (claude -p)": headless_argv("claude", exe, "say hi"),
        "live session": [exe, "-p", *LIVE],
        "live, an HTTP MCP server": with_mcp({"type": "http", "url": url}),
        "live, an in-band MCP server": with_mcp({"type": "sdk", "name": "chorus"}),
    }


def claude_floor(rounds: int) -> None:
    exe = str(find_agent("claude"))
    with tempfile.TemporaryDirectory() as tmp, ModelServer() as server, http_mcp() as url:
        root = Path(tmp)
        (root / "w").mkdir()
        variants = claude_variants(exe, url)
        samples: dict[str, list[float]] = {name: [] for name in variants}
        for n in range(rounds):
            for name, argv in variants.items():
                env = offline_env("claude", root / f"h{n}", server.lane_url("floor"))
                samples[name].append(first_request(server, argv, env, root / "w"))
    bare = statistics.median(samples["bare one-shot (claude -p)"])
    print("claude: process start to first model request (the CLI alone)")
    for name, values in samples.items():
        mid = statistics.median(values)
        print(
            f"  {name:30} {mid * 1000:6.0f} ms  {mid / bare:5.2f}x  (+{(mid - bare) * 1000:.0f} ms)"
        )


async def codex_body_turns(opts: BodyOptions, rounds: int) -> list[float]:
    out = []
    async with CodexBody(opts) as body:
        for _ in range(rounds + 1):
            started = time.perf_counter()
            async for _event in body.turn("make out.txt"):
                pass
            out.append(time.perf_counter() - started)
    return out[1:]  # the first turn starts the thread


def timed(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, check=True)
    return time.perf_counter() - started, done.stdout


def codex_bare_resumes(server: ModelServer, root: Path, rounds: int) -> list[float]:
    exe = str(find_agent("codex"))
    env = offline_env("codex", root / "bare", server.lane_url("bare"))
    server.script(SCENARIO * (rounds + 1), lane="bare")
    argv = headless_argv("codex", exe, "make out.txt")
    _, out = timed(argv, env, root / "w")
    thread = next(json.loads(x)["thread_id"] for x in out.splitlines() if "thread_id" in x)
    resume = [*argv[:-1], "resume", thread, argv[-1]]
    return [timed(resume, env, root / "w")[0] for _ in range(rounds)]


def codex_floor(rounds: int) -> None:
    with tempfile.TemporaryDirectory() as tmp, ModelServer() as server:
        root = Path(tmp)
        (root / "w").mkdir()
        env = offline_env("codex", root / "body", server.lane_url("body"))
        server.script(SCENARIO * (rounds + 2), lane="body")
        opts = BodyOptions(
            cwd=root / "w",
            env=env,
            executable=find_agent("codex"),
            extra={"os_sandbox": True},  # as the daemon starts it: inside Chorus's sandbox
        )
        body = statistics.median(asyncio.run(codex_body_turns(opts, rounds)))
        bare = statistics.median(codex_bare_resumes(server, root, rounds))
    print("codex: a warm turn (a shell command, then an answer)")
    print(f"  {'bare follow-up (exec resume)':30} {bare * 1000:6.0f} ms")
    print(f"  {'Chorus body alone, warm':30} {body * 1000:6.0f} ms  {body / bare:5.2f}x")


FLOORS: dict[str, Callable[[int], None]] = {"claude": claude_floor, "codex": codex_floor}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--body", default="claude,codex")
    args = parser.parse_args()
    print(f"medians of {args.rounds}; load average {os.getloadavg()[0]:.2f}\n")
    for name in args.body.split(","):
        FLOORS[name](args.rounds)
        print()


if __name__ == "__main__":
    main()
