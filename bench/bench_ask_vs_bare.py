"""`chorus ask` against the bare CLI on the same scripted scenario, side by side.

Three figures per body, each round on the same one-tool scenario (a shell
command, then an answer), with the daemon already running as in everyday use:

* cold: `chorus ask` on a new session / the bare CLI's one-shot run;
* warm: a follow-up `chorus ask --session S` on the live session / the bare CLI's
  own follow-up (`--resume <id>`; Codex: `exec resume <id>`);
* client start: `chorus ask --help` (the thin client's path, no daemon call), in ms,
  and the client's round trip: `chorus jobs --json` against the running daemon
  (process start, the fast path's imports, one request on the socket), in ms.

`--spares` turns on `[daemon] spare_bodies` (a pre-started CLI per body and cwd),
which is what takes the CLI's boot out of the cold figure.

    uv run python bench/bench_ask_vs_bare.py [--body claude,codex,gemini] [--rounds N] [--spares]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from _common import bench_home, summary

from chorus.agents import find_agent
from chorus.daemon import DaemonClient, spawn_daemon
from chorus.testing import ModelServer, headless_argv, offline_env, shell, text

SCENARIO = [shell("echo hi > out.txt"), text("done")]
CHORUS = str(Path(sys.executable).with_name("chorus"))


def _timed(argv: list[str], **kw: Any) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, **kw)
    elapsed = time.perf_counter() - started
    assert done.returncode == 0, done.stdout[-500:] + done.stderr[-500:]
    return elapsed, done.stdout


def _native_id(cli: str, stdout: str) -> str:
    for line in stdout.splitlines():
        event = json.loads(line) if line.startswith("{") else {}
        found = event.get("session_id") or event.get("thread_id")
        if found:
            return str(found)
    raise AssertionError(f"no session id in {cli}'s output")


def _resume_argv(cli: str, argv: list[str], native: str) -> list[str]:
    if cli == "codex":  # codex exec [flags] resume <id> <prompt>
        return [*argv[:-1], "resume", native, argv[-1]]
    if cli == "gemini":
        return [*argv, "--resume", "latest"]
    return [*argv, "--resume", native]


def _bare(cli: str, root: Path, server: ModelServer, work: Path, n: int) -> tuple[float, float]:
    """(one-shot run, its own follow-up by native resume)."""
    server.script(SCENARIO * 2, lane="bare")
    env = offline_env(cli, root / f"{cli}-bare-{n}", server.lane_url("bare"))  # type: ignore[arg-type]
    argv = headless_argv(cli, find_agent(cli), "make out.txt")  # type: ignore[arg-type]
    cold, out = _timed(argv, cwd=work, env=env)
    warm, _ = _timed(_resume_argv(cli, argv, _native_id(cli, out)), cwd=work, env=env)
    return cold, warm


def _chorus(cli: str, server: ModelServer, work: Path) -> tuple[float, float]:
    """(`chorus ask` on a new session, a follow-up on the same live session)."""
    server.script(SCENARIO * 2, lane=cli)
    base = [CHORUS, "ask", "make out.txt", "--json"]
    cold, out = _timed([*base, "--body", cli], cwd=work, env=os.environ.copy())
    session = json.loads(out.splitlines()[-1])["session_id"]
    warm, _ = _timed([*base, "--session", session], cwd=work, env=os.environ.copy())
    return cold, warm


def _client_start(rounds: int) -> tuple[list[float], list[float], list[float]]:
    """(``chorus ask --help``, bare ``python -c pass``, typer's ``chorus doctor --help``),
    interleaved so that machine load weighs on all three alike."""
    fast: list[float] = []
    python: list[float] = []
    typer_path: list[float] = []
    for _ in range(rounds):
        fast.append(_timed([CHORUS, "ask", "--help"])[0])
        python.append(_timed([sys.executable, "-c", "pass"])[0])
        typer_path.append(_timed([CHORUS, "doctor", "--help"])[0])
    return fast, python, typer_path


def _round_trip(rounds: int) -> list[float]:
    with bench_home(()) as (_server, work, _root):
        spawn_daemon()
        return [_timed([CHORUS, "jobs", "--json"], cwd=work)[0] for _ in range(rounds)]


def _wait_for_spare(cli: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(s["body"] == cli for s in DaemonClient().status().get("spare_bodies", [])):
            return
        time.sleep(0.1)


def _median(samples: list[float]) -> float:
    return sorted(samples)[len(samples) // 2]


def _bench(cli: str, rounds: int, spares: bool) -> dict[str, list[float]]:
    extra = "spare_bodies = true" if spares else ""
    out: dict[str, list[float]] = {"bare": [], "bare_warm": [], "cold": [], "warm": []}
    with bench_home((cli,), extra=extra) as (server, work, root):
        spawn_daemon()
        for n in range(rounds):
            bare, bare_warm = _bare(cli, root, server, work, n)
            if spares:
                _wait_for_spare(cli)
            cold, warm = _chorus(cli, server, work)
            for key, value in zip(out, (bare, bare_warm, cold, warm), strict=True):
                out[key].append(value)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--body", default="claude,codex,gemini")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--spares", action="store_true")
    args = parser.parse_args()
    start, python, typer_path = _client_start(max(args.rounds, 5))
    print(
        f"client start (chorus ask --help): median {_median(start) * 1000:.0f} ms"
        f"  [python -c pass: {_median(python) * 1000:.0f} ms;"
        f" a typer command's --help: {_median(typer_path) * 1000:.0f} ms]"
    )
    trip = _round_trip(max(args.rounds, 5) * 2)
    print(f"client round trip (chorus jobs --json): median {_median(trip) * 1000:.0f} ms")
    header = f"{'body':8} {'cold / bare':>12} {'warm / bare resume':>20}"
    print(f"{header}   (medians; spares={args.spares})")
    for cli in args.body.split(","):
        r = _bench(cli, args.rounds, args.spares)
        cold = _median(r["cold"]) / _median(r["bare"])
        warm = _median(r["warm"]) / _median(r["bare_warm"])
        print(f"{cli:8} {cold:>11.2f}x {warm:>19.2f}x")
        for key, samples in r.items():
            print(f"    {key:10} {summary(samples)}")


if __name__ == "__main__":
    main()
