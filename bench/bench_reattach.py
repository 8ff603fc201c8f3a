"""kill -9 the daemon mid-turn, N times per CLI; the next daemon must re-attach to the
body and carry the same turn on.

Each round runs one real job (claude, codex, gemini: each against its lane of the
scripted model, streaming a numbered word list slowly), SIGKILLs the daemon once
some of the text is stored (``--twice``: again 0.3 s after the next daemon
answered, that is just after it re-attached, mid-turn), then ``chorus watch`` starts a fresh
daemon and follows the job to its end. Per CLI it prints: jobs completed, words
lost and words duplicated in the stored text deltas, turns re-run (the scripted
server's requests beyond one per job), rounds whose session log has a seq gap or a
repeated seq, rounds where the same CLI process (pid and start time) finished the
turn; then the store's ``PRAGMA integrity_check``.

    uv run python bench/bench_reattach.py [--rounds 20] [--twice] [--clis claude,codex]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _common import bench_home

from chorus.bodies import process_start_time
from chorus.client._lifecycle import read_pid
from chorus.daemon import DaemonClient, stop_daemon
from chorus.events import TextDelta
from chorus.testing import ModelServer, slow_text

WORDS = 24


@dataclass
class Tally:
    completed: int = 0
    lost: int = 0
    duplicated: int = 0
    rerun: int = 0
    seq_faults: int = 0
    same_pid: int = 0


def _until(check: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if check():
                return True
        except Exception:  # the daemon may be between lives
            pass
        time.sleep(0.1)
    return False


def _chorus(work: Path, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "chorus", *args],
        cwd=work,
        env=os.environ.copy(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _kill_daemon() -> None:
    pid = read_pid()
    if pid is None:
        return
    with_start = process_start_time(pid)
    os.kill(pid, signal.SIGKILL)
    _until(lambda: process_start_time(pid) != with_start or _zombie(pid), 10)


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def _deltas(client: DaemonClient, job_id: str) -> list[str]:
    events = client.events(job_id, follow=False)
    return [e.text for e in events if isinstance(e, TextDelta)]


def _round(cli: str, n: int, server: ModelServer, work: Path, twice: bool, tally: Tally) -> None:
    words = [f"r{n}w{i}" for i in range(WORDS)]
    server.script([slow_text(" ".join(words), chunks=WORDS, delay=0.25)], lane=cli)
    before = len(server.turn_requests(lane=cli))
    job_id = _chorus(work, "task", f"round {n}", "--body", cli).stdout.strip()
    client = DaemonClient(autostart=False)
    _until(lambda: len(_deltas(client, job_id)) >= 4, 90)
    session_id = client.job(job_id)["session_id"]
    handle = client.session(session_id)["transport"].get("body_handle") or {}
    _kill_daemon()
    if twice:
        _chorus(work, "start")
        time.sleep(0.3)  # the new daemon has just re-attached; the turn runs on
        _kill_daemon()
    with contextlib.suppress(subprocess.TimeoutExpired):
        _chorus(work, "watch", job_id, timeout=120)
    _score(DaemonClient(), job_id, session_id, words, handle, tally)
    tally.rerun += len(server.turn_requests(lane=cli)) - before - 1
    stop_daemon()


def _score(
    client: DaemonClient,
    job_id: str,
    session_id: str,
    words: list[str],
    handle: dict[str, Any],
    tally: Tally,
) -> None:
    tally.completed += client.job(job_id)["state"] == "succeeded"
    tokens = "".join(_deltas(client, job_id)).split()
    present = set(tokens) & set(words)
    tally.lost += len(words) - len(present)
    tally.duplicated += len(tokens) - len(present)
    if _seqs(session_id) != list(range(1, client.session(session_id)["last_seq"] + 1)):
        tally.seq_faults += 1
    pid, started = handle.get("pid"), handle.get("started")
    now = client.session(session_id)["transport"].get("body_handle") or {}
    if pid and now.get("pid") == pid and now.get("started") == started:
        tally.same_pid += 1


def _seqs(session_id: str) -> list[int]:
    """The session's stored seqs, from the database itself."""
    with sqlite3.connect(_home() / "chorus.db") as conn:
        rows = conn.execute(
            "SELECT seq FROM events WHERE session_id = ? ORDER BY seq", (session_id,)
        ).fetchall()
    return [int(r[0]) for r in rows]


def _home() -> Path:
    return Path(os.environ["CHORUS_HOME"])


def _integrity(home: Path) -> str:
    with sqlite3.connect(home / "chorus.db") as conn:
        rows = conn.execute("PRAGMA integrity_check").fetchall()
    return ", ".join(str(r[0]) for r in rows)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--twice", action="store_true", help="kill again just after re-attach")
    parser.add_argument("--clis", default="claude,codex,gemini")
    args = parser.parse_args()
    clis = tuple(args.clis.split(","))
    tallies: dict[str, Tally] = {}
    with bench_home(clis) as (server, work, _root):
        for cli in clis:
            tallies[cli] = Tally()
            for n in range(args.rounds):
                _round(cli, n, server, work, args.twice, tallies[cli])
        integrity = _integrity(_home())
    mode = "twice (again just after the re-attach)" if args.twice else "once"
    print(f"kill -9 of the daemon mid-turn, {mode} per round, {args.rounds} rounds per CLI")
    head = ("cli", "completed", "lost", "dup", "re-run", "seq", "same pid")
    print("{:8} {:>10} {:>5} {:>5} {:>7} {:>4} {:>9}".format(*head))
    for cli, t in tallies.items():
        done = f"{t.completed}/{args.rounds}"
        same = f"{t.same_pid}/{args.rounds}"
        print(
            f"{cli:8} {done:>10} {t.lost:>5} {t.duplicated:>5} {t.rerun:>7}"
            f" {t.seq_faults:>4} {same:>9}"
        )
    print(f"PRAGMA integrity_check: {integrity}")


if __name__ == "__main__":
    main()
