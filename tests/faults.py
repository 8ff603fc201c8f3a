"""A daemon that kills itself (SIGKILL) at a chosen instant, for fault-injection tests
(test support, not shipped: it replaces the store the daemon opens).

Run it instead of ``python -m chorus.daemon``::

    python tests/faults.py kill-after-job-end

``kill-after-job-end``: the instant a transaction that moved a job to a terminal
state has committed, the process is killed with SIGKILL, before any other write
can start (at the next ``BEGIN``, or 0.5 s after that commit at the latest). This is
the window in which a Chorus that ends jobs in two transactions loses the end.
The hook is SQLite's own statement trace, so nothing in Chorus is patched but the
store the daemon opens.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

_TERMINAL_UPDATE = re.compile(r"UPDATE jobs SET state = '(succeeded|failed|cancelled)'")


class KillAfterJobEnd:
    """SQLite trace callback: arm on a terminal job update, kill at the next BEGIN."""

    def __init__(self, grace_s: float = 0.5) -> None:
        self._armed = False
        self._grace_s = grace_s

    def __call__(self, sql: str) -> None:
        if self._armed and sql.startswith("BEGIN"):
            _die()
        if _TERMINAL_UPDATE.search(sql):
            self._armed = True
        if self._armed and sql == "COMMIT":
            threading.Timer(self._grace_s, _die).start()


def start_faulty_daemon(fault: str, log: Path, *, wait: float = 30.0) -> subprocess.Popen[bytes]:
    """Start the faulty daemon for this ``CHORUS_HOME`` (output appended to ``log``) and
    wait until it answers on its socket; then the CLI uses it like any daemon."""
    from chorus.client import is_responding

    with log.open("ab") as out:
        proc = subprocess.Popen(
            # -P: the tests/ folder is not put on sys.path (its folders are not packages)
            [sys.executable, "-P", str(Path(__file__).resolve()), fault],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            start_new_session=True,
        )
    deadline = time.monotonic() + wait
    while not is_responding(0.5):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"the faulty daemon did not answer; see {log}")
        time.sleep(0.05)
    return proc


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _run(trace: KillAfterJobEnd) -> int:
    import chorus.daemon._server as server
    from chorus.store import SqliteStore

    def store(*args: Any, **kwargs: Any) -> SqliteStore:
        return SqliteStore(sql_trace=trace)

    setattr(server, "open_store", store)  # noqa: B010 (replaced for this process only)
    return asyncio.run(server.serve())


def main(argv: list[str]) -> int:
    """``kill-after-job-end`` is the one fault so far."""
    if argv != ["kill-after-job-end"]:
        print("usage: python tests/faults.py kill-after-job-end", file=sys.stderr)
        return 2
    return _run(KillAfterJobEnd())


if __name__ == "__main__":
    from chorus.daemon._logging import install_logging

    install_logging()
    sys.exit(main(sys.argv[1:]))
