"""What each CLI itself costs for what Chorus asks of it, measured on the CLI alone.

No daemon, no sandbox, no `chorus` client: the pinned CLI, driven by this script
against the scripted model server in this process's environment, each variant side
by side in one run (medians of ``--rounds``, the variants interleaved):

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
* gemini: a new session's first model request and its answer's text (after a
  shell command), as ``gemini -p --yolo`` and over ACP (what a live session
  speaks), its shell command asked for (each ask answered at once) and not
  (``--yolo``).

What lies between these and ``bench_ask_vs_bare.py`` is Chorus's own: the client,
the daemon, the policy, the log and the sandbox.

    uv run python bench/bench_cli_floor.py [--rounds N] [--body claude,codex,gemini]
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

from _common import drive_claude

from chorus.agents import find_agent
from chorus.bodies import BodyOptions
from chorus.bodies.codex import CodexBody
from chorus.testing import GEMINI_MODEL, ModelServer, headless_argv, offline_env, shell, text

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
ANSWER = "floor-answer-5c1e"
SCENARIO = [shell("echo hi > out.txt"), text(ANSWER)]


def caller_env(cli: str, home: Path, url: str) -> dict[str, str]:
    """This process's environment with ``cli``'s offline settings over it (as both sides
    of ``bench_ask_vs_bare.py`` run)."""
    return {**os.environ, **offline_env(cli, home, url)}  # type: ignore[arg-type]


def _mcp_answer(message: dict[str, Any]) -> dict[str, Any]:
    """What the in-band server answers: :func:`mcp_reply`'s, or an empty result."""
    return mcp_reply(message) or {"jsonrpc": "2.0", "result": {}}


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


def _spawned(argv: list[str], env: dict[str, str], cwd: Path, stdin: int) -> subprocess.Popen[str]:
    """``argv`` started with its stdout piped (text) and its stderr dropped."""
    return subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdin=stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )


def first_request(server: ModelServer, argv: list[str], env: dict[str, str], cwd: Path) -> float:
    """Seconds from the CLI's start to its first model request (its turn then ends)."""
    server.script([text("hi")], lane="floor")
    before = len(server.turn_requests(lane="floor"))
    started = time.time()  # the server stamps requests with the wall clock
    live = "--input-format" in argv
    proc = _spawned(argv, env, cwd, subprocess.PIPE if live else subprocess.DEVNULL)
    if live:
        drive_claude(proc, INIT, USER, _mcp_answer)
    else:
        proc.communicate()
    stamps = [r.timestamp for r in server.turn_requests(lane="floor")[before:]]
    return min(stamps) - started


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
                env = caller_env("claude", root / f"h{n}", server.lane_url("floor"))
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
    env = caller_env("codex", root / "bare", server.lane_url("bare"))
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
        env = caller_env("codex", root / "body", server.lane_url("body"))
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


def gemini_acp(argv: list[str], env: dict[str, str], cwd: Path) -> dict[str, float]:
    """One new ACP session's prompt: its start, answered at once; when its text came."""
    started = time.time()
    proc = _spawned(argv, env, cwd, subprocess.PIPE)
    rpc = _Rpc(proc)
    rpc.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    session = rpc.call("session/new", {"cwd": str(cwd), "mcpServers": []})["sessionId"]
    prompt = [{"type": "text", "text": "make out.txt"}]
    rpc.call("session/prompt", {"sessionId": session, "prompt": prompt})
    proc.kill()
    proc.wait()
    return {"text": rpc.text_at - started}


class _Rpc:
    """A minimal ACP client on ``proc``'s stdio: calls, permission asks allowed at once,
    the moment the answer's text arrived."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc, self.next_id, self.text_at = proc, 0, 0.0

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
        self.proc.stdin.flush()

    def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.next_id += 1
        self.send({"id": self.next_id, "method": method, "params": params})
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            line = json.loads(raw)
            if line.get("id") == self.next_id and "method" not in line:
                return dict(line.get("result") or {})
            self.seen(line)
        raise RuntimeError(f"gemini ended before answering {method}")

    def seen(self, line: dict[str, Any]) -> None:
        if line.get("method") == "session/request_permission":
            option = next(o for o in line["params"]["options"] if o["kind"].startswith("allow"))
            outcome = {"outcome": "selected", "optionId": option["optionId"]}
            self.send({"id": line["id"], "result": {"outcome": outcome}})
        elif not self.text_at and _is_text(line):
            self.text_at = time.time()


def _is_text(line: dict[str, Any]) -> bool:
    """An ACP update carrying the agent's answer (the scenario's only text)."""
    update = (
        line.get("params", {}).get("update", {}) if line.get("method") == "session/update" else {}
    )
    return update.get("sessionUpdate") == "agent_message_chunk"


def gemini_bare(argv: list[str], env: dict[str, str], cwd: Path) -> dict[str, float]:
    started = time.time()
    proc = _spawned(argv, env, cwd, subprocess.DEVNULL)
    assert proc.stdout is not None
    text_at = next(time.time() for line in proc.stdout if ANSWER in line)
    proc.communicate()
    return {"text": text_at - started}


#: One way of running Gemini: argv, env, folder -> when things happened.
GeminiRun = Callable[[list[str], dict[str, str], Path], dict[str, float]]


def gemini_floor(rounds: int) -> None:
    exe = str(find_agent("gemini"))
    acp = [exe, "--acp", "-m", GEMINI_MODEL]
    runs: dict[str, tuple[GeminiRun, list[str]]] = {
        "bare one-shot (gemini -p)": (gemini_bare, headless_argv("gemini", exe, "make out.txt")),
        "ACP, its shell command asked": (gemini_acp, acp),
        "ACP, --yolo": (gemini_acp, [*acp, "--yolo"]),
    }
    samples: dict[str, list[dict[str, float]]] = {name: [] for name in runs}
    with tempfile.TemporaryDirectory() as tmp, ModelServer() as server:
        root = Path(tmp)
        (root / "w").mkdir()
        for n in range(rounds):
            for name, (run, argv) in runs.items():
                server.script(SCENARIO, lane="floor")
                before = len(server.turn_requests(lane="floor"))
                env = caller_env("gemini", root / f"g{n}{len(name)}", server.lane_url("floor"))
                started = time.time()
                got = run(argv, env, root / "w")
                first = server.turn_requests(lane="floor")[before].timestamp - started
                samples[name].append({**got, "first": first})
    print("gemini: a new session's first model request and its answer's text (the CLI alone)")
    bare = {
        k: statistics.median(r[k] for r in samples["bare one-shot (gemini -p)"])
        for k in ("first", "text")
    }
    for name, rows in samples.items():
        first = statistics.median(r["first"] for r in rows)
        text_at = statistics.median(r["text"] for r in rows)
        print(
            f"  {name:30} first request {first * 1000:5.0f} ms ({first / bare['first']:4.2f}x)"
            f"  text {text_at * 1000:5.0f} ms ({text_at / bare['text']:4.2f}x)"
        )


FLOORS: dict[str, Callable[[int], None]] = {
    "claude": claude_floor,
    "codex": codex_floor,
    "gemini": gemini_floor,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--body", default="claude,codex,gemini")
    args = parser.parse_args()
    unknown = [name for name in args.body.split(",") if name not in FLOORS]
    if unknown:
        parser.error(f"unknown body {', '.join(unknown)}: pick from {', '.join(FLOORS)}")
    print(f"medians of {args.rounds}; load average {os.getloadavg()[0]:.2f}\n")
    for name in args.body.split(","):
        FLOORS[name](args.rounds)
        print()


if __name__ == "__main__":
    main()
