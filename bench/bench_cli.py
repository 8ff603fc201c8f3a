"""How fast the everyday commands answer: ``python bench/bench_cli.py``.

In one run, beside ``python -c pass`` (the floor: an interpreter that does nothing):
``chorus status --json``, ``chorus jobs --json``, ``chorus sessions list --json``,
``chorus log JOB --json`` and ``chorus interrupt JOB --json`` (an ended job) against a
running daemon, ``chorus jobs --json`` and ``chorus stop --json`` with no daemon, and
``chorus start`` on a fresh CHORUS_HOME until it returns (the daemon said it is ready
and answers). Each figure is the median of ``--runs`` runs: wall time and
the CPU time of the process (user + system, as the kernel counts it for the child;
for ``start`` the starter's and the daemon's until ``start`` returned, which includes
warm-up work the daemon began once ready). Then ``start (fresh home) to idle``: the
CPU seconds the daemon's whole tree spent from its spawn until it is idle and ready for
a first job (its own threads, the warm-up among them, the meter's process, and every
child it ran and reaped, such as the system probe's ``--version`` runs), beside the
starter's; its wall figure is the time until the tree went idle. ``autostart (fresh
home) to idle``: the same for a daemon a request started (``start_daemon()``, as
``chorus ask`` does when none runs), which does not warm up. The machine's load
(``uptime``) is printed too: wall times on a busy machine say little, CPU times more.

``ask --json: spawn to request`` is the time from spawning ``chorus ask hi --json`` to its
``POST /jobs`` arriving on the socket, and ``ask --json: end to exit`` the time from the
job's last event (``job_ended``) being sent to the process's exit; both against a fake
daemon in this process (a unix socket server that answers the job at once and, like the
daemon, ends the event stream ``--end-lag-ms`` after the job's end).

Byte code is cached for the runs (in a temporary ``PYTHONPYCACHEPREFIX``), as an
installed Chorus has it, even where the environment sets ``PYTHONDONTWRITEBYTECODE``
(then every module is compiled at every start: ``--as-is`` measures that).
Compare another checkout with ``PYTHONPATH=/that/src python bench/bench_cli.py``.
"""

from __future__ import annotations

import argparse
import functools
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from chorus.testing import SocketStub, send_created, send_event, send_stream_head

PY = sys.executable


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Run ``argv`` to its end; (wall seconds, CPU seconds of the child)."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        err = proc.stderr.read().decode() if proc.stderr else ""
        raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}: {err[-500:]}")
    if proc.stderr:
        proc.stderr.close()
    return wall, usage.ru_utime + usage.ru_stime


def chorus(*args: str) -> list[str]:
    return [PY, "-m", "chorus", *args]


def sample(runs: int, once: Callable[[], tuple[float, float]]) -> tuple[float, float]:
    """Median wall and CPU seconds of ``runs`` runs (after one warm-up run)."""
    once()
    walls, cpus = zip(*(once() for _ in range(runs)), strict=True)
    return statistics.median(walls), statistics.median(cpus)


def sample_start(
    runs: int, env: dict[str, str], argv: list[str] | None = None
) -> list[tuple[float, float]]:
    """:func:`fresh_start`'s two figures, each the median of ``runs`` runs (after one
    warm-up run), with the range of the CPU figures over the runs."""
    fresh_start(env, argv)
    runs_done = [fresh_start(env, argv) for _ in range(runs)]
    out = []
    for i in (0, 1):
        walls = [r[i][0] for r in runs_done]
        cpus = [r[i][1] for r in runs_done]
        RANGES.append(f"{min(cpus) * 1000:.0f}-{max(cpus) * 1000:.0f} ms")
        out.append((statistics.median(walls), statistics.median(cpus)))
    return out


#: The CPU ranges of the start figures, printed after them.
RANGES: list[str] = []


#: A daemon started as a request that finds none starts it (no warm-up: the request
#: loads what it needs), as ``chorus ask`` does.
AUTOSTART = [PY, "-c", "from chorus.client import start_daemon; start_daemon()"]


def fresh_start(
    env: dict[str, str], argv: list[str] | None = None
) -> tuple[tuple[float, float], tuple[float, float]]:
    """``chorus start`` (or ``argv``) on an empty CHORUS_HOME, then stop that daemon: the wall time
    until it returned, and the CPU time of the starter and of the daemon by then; then
    the time until the daemon's tree went idle and the CPU time of the starter and of
    that whole tree by then (:func:`until_idle`)."""
    with tempfile.TemporaryDirectory(prefix="chorus-bench-start-") as tmp:
        home = {**env, "CHORUS_HOME": str(Path(tmp) / "home")}
        try:
            wall, cpu = timed(argv or chorus("start"), home)
            pid = int((Path(tmp) / "home" / "run" / "daemon.pid").read_text().strip())
            ready = (wall, cpu + proc_cpu(pid, children=False))
            idle_wall, tree = until_idle(pid)
            return ready, (wall + idle_wall, cpu + tree)
        finally:
            subprocess.run(chorus("stop"), env=home, capture_output=True, check=False)


def proc_cpu(pid: int, *, children: bool) -> float:
    """CPU seconds process ``pid`` has used so far (with ``children``: and the children
    it waited for); 0 once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    ticks = sum(int(f) for f in fields[11 : 15 if children else 13])
    return ticks / os.sysconf("SC_CLK_TCK")


def descendants(pid: int) -> set[int]:
    """``pid`` and every live process under it."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    tree, grew = {pid}, True
    while grew:
        found = {child for child, parent in parents.items() if parent in tree}
        grew = not found <= tree
        tree |= found
    return tree


def tree_cpu(pid: int) -> float:
    """CPU seconds of ``pid``'s whole tree: each live process's own and its reaped children's."""
    return sum(proc_cpu(one, children=True) for one in descendants(pid))


#: Idle: the tree used less than this share of one CPU over :data:`IDLE_WINDOW_S`.
IDLE_SHARE, IDLE_WINDOW_S, IDLE_PATIENCE_S = 0.03, 1.0, 60.0


def until_idle(pid: int) -> tuple[float, float]:
    """Seconds until ``pid``'s tree went idle (a window of little CPU, not counted) and
    the tree's CPU seconds by the window's start."""
    start = time.perf_counter()
    before = tree_cpu(pid)
    while time.perf_counter() - start < IDLE_PATIENCE_S:
        time.sleep(IDLE_WINDOW_S)
        now = tree_cpu(pid)
        if now - before < IDLE_SHARE * IDLE_WINDOW_S:
            return time.perf_counter() - start - IDLE_WINDOW_S, before
        before = now
    raise SystemExit(f"the daemon {pid} was not idle after {IDLE_PATIENCE_S:.0f} s")


#: The home of the read commands: claude is ``/bin/false`` (a job fails at once, no
#: model is asked) and the gateway stays on the socket (no port taken).
CONFIG = """[daemon]
notifications = false
[gateway]
tcp = false
[agents.claude]
command = "/bin/false"
"""


def a_job(env: dict[str, str]) -> str:
    """A job id for ``log``: its body is ``/bin/false``, so it ends at once."""
    done = subprocess.run(
        chorus("task", "bench", "--body", "claude"), env=env, capture_output=True, text=True
    )
    return done.stdout.strip() or "none"


def row(name: str, figures: tuple[float, float], floor: tuple[float, float]) -> str:
    wall, cpu = figures
    return (
        f"{name:<28} wall {wall * 1000:7.1f} ms ({wall / floor[0]:5.1f}x)"
        f"   cpu {cpu * 1000:7.1f} ms ({cpu / max(floor[1], 1e-6):5.1f}x)"
    )


def read_commands(runs: int, floor: tuple[float, float], base: dict[str, str]) -> list[str]:
    """The read commands with no daemon, then against a running one."""
    lines = []
    with tempfile.TemporaryDirectory(prefix="chorus-bench-cli-") as tmp:
        env = {**base, "CHORUS_HOME": str(Path(tmp) / "home")}
        Path(tmp, "home").mkdir()
        Path(tmp, "home", "config.toml").write_text(CONFIG)
        cold = sample(runs, lambda: timed(chorus("jobs", "--json"), env))
        lines.append(row("jobs --json (no daemon)", cold, floor))
        cold = sample(runs, lambda: timed(chorus("stop", "--json"), env))
        lines.append(row("stop --json (no daemon)", cold, floor))
        subprocess.run(chorus("start"), env=env, check=True, capture_output=True)
        try:
            job = a_job(env)
            for argv in (
                ["status", "--json"],
                ["jobs", "--json"],
                ["jobs"],
                ["sessions", "list", "--json"],
                ["log", job, "--json"],
                ["interrupt", job, "--json"],
            ):
                name = " ".join(argv).replace(job, "JOB")
                figures = sample(runs, functools.partial(timed, chorus(*argv), env))
                lines.append(row(name, figures, floor))
        finally:
            subprocess.run(chorus("stop"), env=env, capture_output=True, check=False)
    return lines


class FakeDaemon(SocketStub):
    """Answers ``POST /jobs`` with a job and ``GET /jobs/j1/events`` with its events
    (a chunked SSE stream ended ``lag`` seconds after ``job_ended``), noting when the
    job's request arrived and when its last event went out."""

    JOB = {"id": "j1", "state": "queued", "session_id": "s1", "prompt": "hi"}
    EVENTS = (
        {"type": "job_started"},
        {"type": "text", "text": "hi"},
        {"type": "job_ended", "state": "succeeded"},
    )

    def __init__(self, path: Path, lag: float) -> None:
        self.lag = lag
        self.arrived = self.ended = 0.0
        super().__init__(path)

    def answer(self, conn: socket.socket) -> None:
        head = conn.recv(65536)
        if head.startswith(b"POST /jobs "):
            self.arrived = time.perf_counter()
            send_created(conn, self.JOB)
            return
        send_stream_head(conn)
        for seq, event in enumerate(self.EVENTS, 1):
            send_event(conn, {"seq": seq, "job_id": "j1", **event})
        self.ended = time.perf_counter()
        time.sleep(self.lag)
        conn.sendall(b"0\r\n\r\n")


def ask_once(env: dict[str, str], fake: FakeDaemon) -> tuple[float, float]:
    """One ``chorus ask hi --json``: (spawn to request on the socket, end to exit)."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        chorus("ask", "hi", "--json"),
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    _, status, _ = os.wait4(proc.pid, 0)
    done = time.perf_counter()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"chorus ask failed: {proc.stderr.read().decode()[-500:]}")
    return fake.arrived - start, done - fake.ended


def ask_figures(
    runs: int, floor: tuple[float, float], base: dict[str, str], lag: float
) -> list[str]:
    """``chorus ask --json`` against :class:`FakeDaemon`: spawn to request, end to exit."""
    with tempfile.TemporaryDirectory(prefix="chorus-bench-ask-") as tmp:
        env = {**base, "CHORUS_HOME": str(Path(tmp) / "home")}
        Path(tmp, "home", "run").mkdir(parents=True)
        fake = FakeDaemon(Path(tmp, "home", "run", "chorus.sock"), lag)
        try:
            ask_once(env, fake)
            figures = [ask_once(env, fake) for _ in range(runs)]
        finally:
            fake.close()
    to_request = statistics.median(f[0] for f in figures)
    to_exit = statistics.median(f[1] for f in figures)
    return [
        f"{'ask --json: spawn to request':<28} wall {to_request * 1000:7.1f} ms"
        f" ({to_request / floor[0]:5.1f}x)",
        f"{'ask --json: end to exit':<28} wall {to_exit * 1000:7.1f} ms"
        f" (stream ended {lag * 1000:.0f} ms after the job)",
    ]


def bench_env(prefix: Path, as_is: bool) -> dict[str, str]:
    """The commands' environment: with byte code cached (as an installed Chorus has it)
    in a folder of its own, so the tree is not written to, unless ``as_is``."""
    env = dict(os.environ)
    if not as_is:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(prefix)
    return env


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--start-runs", type=int, default=5)
    parser.add_argument("--start-only", action="store_true", help="Only start-to-ready.")
    parser.add_argument(
        "--no-start", action="store_true", help="Leave out the start-to-ready figures."
    )
    parser.add_argument(
        "--end-lag-ms",
        type=float,
        default=10.0,
        help="The fake daemon ends a job's event stream this long after its last event.",
    )
    parser.add_argument(
        "--as-is",
        action="store_true",
        help="Keep the environment's PYTHONDONTWRITEBYTECODE (every module compiled at "
        "every start) instead of caching byte code in a temporary folder.",
    )
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop the daemons started
    print(subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    with tempfile.TemporaryDirectory(prefix="chorus-bench-pyc-") as pyc:
        env = bench_env(Path(pyc), args.as_is)
        print("byte code:", "as the environment says" if args.as_is else "cached (a warm-up run)")
        floor = sample(args.runs, lambda: timed([PY, "-c", "pass"], env))
        lines = [row("python -c pass", floor, floor)]
        if not args.start_only:
            lines += ask_figures(args.runs, floor, env, args.end_lag_ms / 1000)
            lines += read_commands(args.runs, floor, env)
        if args.no_start:
            print("\n".join(lines))
            return
        ready, idle = sample_start(args.start_runs, env)
        lines.append(row("start (fresh home) to ready", ready, floor) + f"  [{RANGES[0]}]")
        lines.append(row("start (fresh home) to idle", idle, floor) + f"  [{RANGES[1]}]")
        _, idle = sample_start(args.start_runs, env, AUTOSTART)
        lines.append(row("autostart (fresh) to idle", idle, floor) + f"  [{RANGES[3]}]")
    print("\n".join(lines))
    print(subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())


if __name__ == "__main__":
    main()
