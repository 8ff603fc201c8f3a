"""`chorus ask` against the bare CLI on the same scripted scenario, side by side.

Each round runs the same one-tool scenario (a shell command, then an answer) in
the bare CLI's own one-shot mode and through `chorus ask` (daemon already
running, as in everyday use), and prints the time of each and the ratio.

    uv run python bench/bench_ask_vs_bare.py [--body claude|codex|gemini] [--rounds N]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

from _common import bench_home, summary

from chorus.agents import find_agent
from chorus.daemon import spawn_daemon
from chorus.testing import headless_argv, offline_env, shell, text

SCENARIO = [shell("echo hi > out.txt"), text("done")]


def _bare(cli: str, root, server, work) -> float:  # type: ignore[no-untyped-def]
    server.script(SCENARIO, lane="bare")
    env = offline_env(cli, root / f"{cli}-bare-home", server.lane_url("bare"))
    argv = headless_argv(cli, find_agent(cli), "make out.txt")
    started = time.perf_counter()
    done = subprocess.run(argv, cwd=work, env=env, stdin=subprocess.DEVNULL, capture_output=True)
    elapsed = time.perf_counter() - started
    assert done.returncode == 0, done.stderr[-500:]
    return elapsed


def _chorus(cli: str, server, work) -> float:  # type: ignore[no-untyped-def]
    server.script(SCENARIO, lane=cli)
    argv = [sys.executable, "-m", "chorus", "ask", "make out.txt", "--body", cli, "--json"]
    started = time.perf_counter()
    done = subprocess.run(argv, cwd=work, env=os.environ.copy(), capture_output=True)
    elapsed = time.perf_counter() - started
    assert done.returncode == 0, done.stderr[-500:]
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--body", default="claude", choices=["claude", "codex", "gemini"])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with bench_home((args.body,)) as (server, work, root):
        spawn_daemon()
        bare, through = [], []
        for _ in range(args.rounds):
            bare.append(_bare(args.body, root, server, work))
            through.append(_chorus(args.body, server, work))
    ratio = sorted(through)[len(through) // 2] / sorted(bare)[len(bare) // 2]
    print(f"body: {args.body}")
    print(f"bare CLI     : {summary(bare)}")
    print(f"chorus ask   : {summary(through)}")
    print(f"ratio (median chorus / median bare): {ratio:.2f}x")


if __name__ == "__main__":
    main()
