"""The escape suite, tallied: every test marked ``escape`` (attacks on the boundary
between a body and the person's machine, on the real CLIs) is run, each records
what it tried, and this prints tried / held per family, body and mode, with the
controls (the same attack with that boundary off) that show the attack was live.

    uv run python bench/bench_escapes.py [-k EXPR] [pytest args...]

Exit status: pytest's (non-zero when any escape was not held).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

Key = tuple[str, str, str]


def _run(extra: list[str], tally: Path) -> int:
    env = os.environ | {"CHORUS_ESCAPE_TALLY": str(tally), "CHORUS_REQUIRE_AGENTS": "1"}
    argv = [sys.executable, "-m", "pytest", "-m", "escape", "-q", "-p", "no:cacheprovider"]
    return subprocess.run([*argv, *extra], env=env, check=False).returncode


def _rows(tally: Path) -> list[dict[str, object]]:
    if not tally.exists():
        return []
    return [json.loads(line) for line in tally.read_text().splitlines() if line.strip()]


def _table(rows: list[dict[str, object]]) -> dict[Key, list[int]]:
    """(family, body, mode) -> [tried, held, controls run, controls that worked]."""
    out: dict[Key, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for row in rows:
        cell = out[(str(row["family"]), str(row["body"]), str(row["mode"]))]
        cell[0] += 1
        cell[1] += bool(row["held"])
        if row.get("control") is not None:
            cell[2] += 1
            cell[3] += bool(row["control"])
    return out


def _print(table: dict[Key, list[int]]) -> None:
    print(f"\n{'family':<10} {'body':<16} {'mode':<18} {'tried':>5} {'held':>5} {'controls':>9}")
    for (family, body, mode), (tried, held, runs, live) in sorted(table.items()):
        controls = f"{live}/{runs} live" if runs else "-"
        print(f"{family:<10} {body:<16} {mode:<18} {tried:>5} {held:>5} {controls:>9}")
    tried = sum(c[0] for c in table.values())
    held = sum(c[1] for c in table.values())
    print(f"\nall: {held} of {tried} escapes held")


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="chorus-escapes-") as tmp:
        tally = Path(tmp) / "tally.jsonl"
        code = _run(sys.argv[1:], tally)
        _print(_table(_rows(tally)))
    return code


if __name__ == "__main__":
    raise SystemExit(main())
