"""Time from a quota error on one body to the next body's first event.

Claude writes one file, then hits a quota 429; the job fails over to Codex.
The time is measured on the event log's own timestamps: the ``turn_failed``
event of Claude to the first event Codex produced after the handoff.

    uv run python bench/bench_failover.py [--rounds N]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

from _common import bench_home, summary

from chorus.daemon import spawn_daemon
from chorus.events import Handoff, TurnFailed, parse_event
from chorus.testing import error, shell, text

ROUTER = """[router]
bodies = ["claude", "codex"]
cooldown_base_s = 0.1
notify_on_failover = false
"""


def _round(server, work) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    server.script([shell("echo one > one.txt"), error("quota", times=None)], lane="claude")
    server.script([shell("echo two > two.txt"), text("done")], lane="codex")
    argv = [sys.executable, "-m", "chorus", "ask", "write both", "--body", "claude", "--json"]
    out = subprocess.run(argv, cwd=work, env=os.environ.copy(), capture_output=True, text=True)
    events = [parse_event(line) for line in out.stdout.splitlines()]
    failed = next(e for e in events if isinstance(e, TurnFailed))
    handoff = next(i for i, e in enumerate(events) if isinstance(e, Handoff))
    first = next(e for e in events[handoff + 1 :] if e.body == "codex")
    return first.ts - failed.ts, events[handoff].ts - failed.ts


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with bench_home(("claude", "codex"), ROUTER) as (server, work, _root):
        spawn_daemon()
        rounds = [_round(server, work) for _ in range(args.rounds)]
    print(f"quota error -> handoff decided   : {summary([r[1] for r in rounds])}")
    print(f"quota error -> codex first event : {summary([r[0] for r in rounds])}")


if __name__ == "__main__":
    main()
