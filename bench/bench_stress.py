"""The stress and soak runs kept out of the test suite: every test marked ``slow``
(the full body x mode policy matrix, many SIGKILLs around routine firings, ...),
each the many-iteration version of a test the suite runs once or a few times.

    uv run python bench/bench_stress.py [--rounds N] [-n WORKERS] [pytest args...]

``--rounds`` sets CHORUS_SOAK_ROUNDS (how many times a soak repeats its step).
Prints pytest's durations of the slow tests; exit status: pytest's.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=8, help="repeats of a soak's step")
    parser.add_argument("-n", dest="workers", default="2", help="pytest-xdist workers")
    args, extra = parser.parse_known_args()
    env = os.environ | {"CHORUS_SOAK_ROUNDS": str(args.rounds), "CHORUS_REQUIRE_AGENTS": "1"}
    argv = [sys.executable, "-m", "pytest", "-m", "slow", "-n", args.workers, "-q"]
    argv += ["-p", "no:cacheprovider", "--durations=0", "--timeout=900", *extra]
    return subprocess.run(argv, env=env, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
