"""Where a cold `chorus ask --body claude` spends its time before the first model request.

In one fresh ``CHORUS_HOME`` with the daemon running (as ``bench_ask_vs_bare.py``),
one unmeasured job first; then the command line the daemon runs for a new Claude
session (the sandbox's wrapper and its arguments, the environment, the folder) is
read from ``/proc`` during a second job. Each round then runs, interleaved:

* bare: ``claude -p`` in the caller's environment (as ``bench_ask_vs_bare.py``);
* chorus: ``chorus ask`` on a new session, from the command's start and from the
  body's spawn (its run directory's ``pid`` file, written as the wrapper starts);
* replayed: that very command line started by this script (the sandbox included),
  driven as the daemon drives it (``initialize``, the prompt on its answer, each
  in-band MCP message answered at once with the daemon's own answers), on a lane of
  its own with no meter: the same CLI and configuration with no daemon around it;
* unsandboxed: the same, with the CLI's own command line and environment as seen
  inside the sandbox, without it.

Medians of each, in ms. "chorus from spawn" against "replayed" is what running
under the daemon costs the CLI (its load on the machine, its answers' latency);
"replayed" against "unsandboxed" what the sandbox costs; "chorus from start" minus
"chorus from spawn" what the client and the daemon take before the CLI starts.

    uv run python bench/bench_claude_cold.py [--rounds N]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

from _common import bench_home, drive_claude
from bench_ask_vs_bare import CHORUS, EXTRACTED, SCENARIO, _await_extraction

from chorus.agents import find_agent
from chorus.testing import ModelServer, headless_argv, offline_env

ASK = [CHORUS, "ask", "make out.txt", "--json", "--body", "claude"]
INIT = {"type": "control_request", "request_id": "init", "request": {"subtype": "initialize"}}
USER = {
    "type": "user",
    "session_id": "",
    "message": {"role": "user", "content": "make out.txt"},
    "parent_tool_use_id": None,
}
#: The ``sh -c`` detach wrapper's own arguments before the command (see ``_detached``).
WRAPPER_ARGS = 11


def _children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(stat.parent.name))
        except (OSError, ValueError):
            continue
    return found


def _process(pid: int) -> tuple[str, list[str], dict[str, str], str]:
    """(exe, argv, environment, cwd) of ``pid``; raises OSError once it is gone."""
    proc = Path(f"/proc/{pid}")
    argv = [a.decode() for a in (proc / "cmdline").read_bytes().split(b"\0")[:-1]]
    pairs = [e.decode().split("=", 1) for e in (proc / "environ").read_bytes().split(b"\0")[:-1]]
    env = {pair[0]: pair[1] for pair in pairs if len(pair) == 2}
    return os.readlink(proc / "exe"), argv, env, os.readlink(proc / "cwd")


def _capture(daemon: int, work: Path) -> dict[str, Any]:
    """During one job: the wrapper's command (argv, env, cwd) and the CLI's own."""
    job = subprocess.Popen(ASK, cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    got: dict[str, Any] = {}
    while job.poll() is None and len(got) < 2:
        todo = _children(daemon)
        while todo:
            pid = todo.pop()
            try:
                exe, argv, env, cwd = _process(pid)
            except OSError:
                continue
            if exe.endswith("sh") and argv[3:4] == ["sh"] and "--input-format" in argv:
                got.setdefault("wrapped", (argv[WRAPPER_ARGS:], env, cwd))
            elif "--input-format" in argv and not exe.endswith(("sh", "bwrap")):
                got.setdefault("cli", (argv, env, cwd))
            todo += _children(pid)
        time.sleep(0.002)
    job.wait()
    return got


def _answers(home: Path) -> dict[str, Any]:
    """The daemon's answers to the MCP ``initialize`` and ``tools/list`` (its last body)."""
    sent = max(home.glob("run/bodies/*/sent"), key=lambda p: p.stat().st_mtime)
    found: dict[str, Any] = {}
    for raw in sent.read_text().splitlines():
        line = json.loads(json.loads(raw)["line"])
        reply = line.get("response", {}).get("response", {}).get("mcp_response", {})
        result = reply.get("result") if isinstance(reply, dict) else None
        if isinstance(result, dict) and "capabilities" in result:
            found["initialize"] = reply
        elif isinstance(result, dict) and "tools" in result:
            found["tools/list"] = reply
    return found


def _mcp_reply(message: dict[str, Any], answers: dict[str, Any]) -> dict[str, Any]:
    reply = answers.get(str(message.get("method")), {"jsonrpc": "2.0", "result": {}})
    return {**reply, "id": message.get("id", 0)}


def _first(server: ModelServer, lane: str, since: int, start: float) -> float:
    """Ms from ``start`` (wall clock) to the lane's first model request after ``since``."""
    stamps = [r.timestamp for r in server.requests[since:] if r.lane == lane]
    return (min(stamps) - start) * 1000 if stamps else float("nan")


def _replay(
    server: ModelServer, command: tuple[list[str], dict[str, str], str], answers: dict[str, Any]
) -> float:
    argv, env, cwd = command
    server.script(SCENARIO, lane="replay")
    since, started = len(server.requests), time.time()
    proc = subprocess.Popen(
        argv,
        cwd=cwd,
        env={**env, "ANTHROPIC_BASE_URL": server.lane_url("replay")},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    drive_claude(proc, INIT, USER, lambda message: _mcp_reply(message, answers))
    return _first(server, "replay", since, started)


def _bare(server: ModelServer, root: Path, work: Path, n: int) -> float:
    server.script(SCENARIO, lane="bare")
    env = {**os.environ, **offline_env("claude", root / f"bare-{n}", server.lane_url("bare"))}
    since, started = len(server.requests), time.time()
    argv = headless_argv("claude", find_agent("claude"), "make out.txt")
    subprocess.run(argv, cwd=work, env=env, capture_output=True, stdin=subprocess.DEVNULL)
    return _first(server, "bare", since, started)


def _chorus(server: ModelServer, home: Path, work: Path, left: int) -> tuple[float, float]:
    """(ms from the command's start, ms from the body's spawn) to the first request."""
    since, started = len(server.requests), time.time()
    subprocess.run(ASK, cwd=work, capture_output=True)
    spawned = max(home.glob("run/bodies/*/pid"), key=lambda p: p.stat().st_mtime).stat().st_mtime
    _await_extraction(server, "claude", left=left)
    return _first(server, "claude", since, started), _first(server, "claude", since, spawned)


def measure(rounds: int) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    with bench_home(("claude",)) as (server, work, root):
        from chorus.daemon import DaemonClient

        subprocess.run([CHORUS, "start"], cwd=work, check=True, capture_output=True)
        home = Path(os.environ["CHORUS_HOME"])
        left = (rounds + 2) * 3
        server.script([*SCENARIO, EXTRACTED] * (rounds + 2), lane="claude")
        for _ in range(2):  # the first loads the body's code; the second is read
            got = _capture(int(DaemonClient().status()["pid"]), work)
            left -= 3
            _await_extraction(server, "claude", left=left)
        answers = _answers(home)
        for n in range(rounds):
            out.setdefault("bare", []).append(_bare(server, root, work, n))
            left -= 3
            start, spawn = _chorus(server, home, work, left)
            out.setdefault("chorus from start", []).append(start)
            out.setdefault("chorus from spawn", []).append(spawn)
            out.setdefault("replayed", []).append(_replay(server, got["wrapped"], answers))
            argv, env, cwd = got["cli"]  # its TMPDIR is the sandbox's own: one outside
            env = {**env, "TMPDIR": str(root)}
            out.setdefault("unsandboxed", []).append(_replay(server, (argv, env, cwd), answers))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    samples = measure(args.rounds)
    print(f"ms to the first model request, medians of {args.rounds}; load {os.getloadavg()[0]:.2f}")
    for name, values in samples.items():
        print(f"  {name:20} {statistics.median(values):6.0f}")


if __name__ == "__main__":
    main()
