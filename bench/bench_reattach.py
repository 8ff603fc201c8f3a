"""kill -9 the daemon mid-turn, N times per CLI; the next daemon must re-attach to the
body and carry the same turn on. With ``--kill body``: kill -9 the body's own launcher
(its ``node`` launcher or its native program) mid-turn instead; the daemon must end what is left of
the body and resume the session natively, and the job must succeed.

Each round runs one real job (claude, codex, gemini, and the ACP adapters
claude-code-acp and codex-acp on the lane of the CLI they drive: each against its
lane of the scripted model, streaming a numbered word list slowly, in a new
session), SIGKILLs the daemon once
some of the text is stored (``--twice``: again 0.3 s after the next daemon
answered, that is just after it re-attached, mid-turn), then ``chorus watch`` starts a fresh
daemon and follows the job to its end. Per CLI it prints: jobs completed, words
lost and words duplicated in the stored text deltas, turns re-run (the scripted
server's requests beyond one per job), rounds whose session log has a seq gap or a
repeated seq, rounds where the same CLI process (pid and start time) finished the
turn; with ``--kill body``, processes of the killed body's group left running,
rounds where no launcher was found, and rounds resumed on a new native session
instead of the same one (``fresh``: a CLI killed in its first turn may have stored
no conversation to resume, claude-code-acp's had none, and the session is then
rebuilt from Chorus's log); then the store's ``PRAGMA integrity_check``.

With ``--kill body`` each round is also scored, from the session's own ``resume``
notices and native id: resumed natively (the same native session carried the job
on), resumed on a new native session (rebuilt from Chorus's log), or failed (the
job did not succeed); a round where no launcher was found is no sample. The body
is killed once the job's own body has streamed some text (``codex-exec``, which
streams none, 1.5 s after its turn's request), in a new session's first turn, or
with ``--warm`` in a session's second turn. The load average is printed at the
start and the end, and after each round on stderr.

    uv run python bench/bench_reattach.py [--rounds 20] [--twice] [--clis claude,codex]
    uv run python bench/bench_reattach.py --kill body [--warm] [--round-timeout 240]
        [--clis claude,claude-print,codex,codex-exec,gemini,gemini-headless,codex-acp]
"""

from __future__ import annotations

import argparse
import contextlib
import json
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

from chorus.bodies import CLI_OF, process_start_time
from chorus.client._lifecycle import read_pid
from chorus.daemon import DaemonClient, stop_daemon
from chorus.events import TextDelta
from chorus.testing import ModelServer, offline_env, slow_text, text

WORDS = 24
#: Bodies that stream no text deltas: killed 1.5 s after their turn's request, once
#: their CLI runs.
NO_DELTAS = frozenset({"codex-exec"})
#: The ACP adapters and the CLI whose model API (and scripted lane) each drives.
ACP_LANES = {"claude-code-acp": "claude", "codex-acp": "codex"}


@dataclass
class Tally:
    completed: int = 0
    lost: int = 0
    duplicated: int = 0
    rerun: int = 0
    seq_faults: int = 0
    same_pid: int = 0
    left: int = 0  # --kill body: processes of the killed body's group left running
    missed: int = 0  # --kill body: rounds where no launcher was found to kill
    fresh: int = 0  # --kill body: rounds whose session got a new native session (no resume)
    # --kill body, each round once: the job succeeded on the same native session,
    # succeeded on a new one (rebuilt from Chorus's log), or did not succeed
    native: int = 0
    new: int = 0
    failed: int = 0


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


def _group_of(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[2])
    except (OSError, IndexError, ValueError):
        return None


def _launchers(work: Path, handle: dict[str, Any], since: float) -> list[tuple[int, int]]:
    """(start time, pid) of the CLI processes of this job's body: in its process
    group when the store names one that still runs, else working in ``work`` and
    started since ``since`` (a one-shot body, or a body started after the handle
    was stored)."""
    pgid = handle.get("pid")
    in_group = _clis(work, lambda pid, started, inside: _group_of(pid) == int(pgid)) if pgid else []
    floor = _ticks_at(since)
    return in_group or _clis(work, lambda pid, started, inside: inside and started >= floor)


def _clis(work: Path, ours: Callable[[int, int, bool], bool]) -> list[tuple[int, int]]:
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            node = _is_cli(os.readlink(proc / "exe"))
            inside = Path(os.readlink(proc / "cwd")).is_relative_to(work)
        except OSError:
            continue
        started = process_start_time(int(proc.name))
        if node and started is not None and ours(int(proc.name), int(started), inside):
            found.append((int(started), int(proc.name)))
    return sorted(found)


#: Programs between the daemon and a CLI (the detached wrapper, the sandbox).
WRAPPERS = ("bwrap", "sh", "bash", "dash", "python", "sleep")


def _is_cli(exe: str) -> bool:
    """A CLI's own process: its ``node`` launcher or a native binary (Claude's)."""
    return not exe.rsplit("/", 1)[-1].startswith(WRAPPERS)


def _ticks_at(when: float) -> int:
    """A wall-clock time as clock ticks since boot (what /proc's start times count)."""
    uptime = float(Path("/proc/uptime").read_text().split()[0])
    return int((uptime - (time.time() - when)) * os.sysconf("SC_CLK_TCK"))


def _group_left(handle: dict[str, Any]) -> int:
    """Processes still alive in the killed body's process group (an orphan would
    hold its session: Codex's native app-server did)."""
    pgid = handle.get("pid")
    if not pgid:
        return 0
    left = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            left += int(fields[2]) == int(pgid) and fields[0] != "Z"
    return left


def _kill_launcher(work: Path, handle: dict[str, Any], since: float) -> bool:
    launchers = _launchers(work, handle, since)
    if not launchers:
        seen = _clis(work, lambda pid, started, inside: inside)
        print(f"no launcher: handle {handle}, CLIs in the work dir {seen}", file=sys.stderr)
    if launchers:
        os.kill(launchers[0][1], signal.SIGKILL)
    return bool(launchers)


def _round(
    body: str, n: int, server: ModelServer, work: Path, args: argparse.Namespace, tally: Tally
) -> None:
    words = [f"r{n}w{i}" for i in range(WORDS)]
    lane = _lane(body)
    slow = slow_text(" ".join(words), chunks=WORDS, delay=0.25)
    # --kill body: the resumed turn is asked again; and a request of another CLI on the
    # lane (the daemon's warm-up of a CLI, Claude's classifier) may take a reply first
    later = [slow] * 3 if args.kill == "body" else []
    warm = [text("warmed up")] if args.warm else []
    server.script([*warm, slow, *later], lane=lane)
    since = time.time()  # (--warm: the body starts in the warm-up job)
    session = _warm_session(work, body, n) if args.warm else []
    before = len(server.turn_requests(lane=lane))
    job_id = _chorus(work, "task", f"round {n}", "--body", body, *session).stdout.strip()
    client = DaemonClient(autostart=False)
    if args.kill == "body" and body in NO_DELTAS:  # mid-turn: the model is streaming to
        # this job's own CLI (a request on the lane may be another CLI's)
        asked = lambda: len(server.turn_requests(lane=lane)) > before  # noqa: E731
        _until(lambda: asked() and bool(_launchers(work, {}, since)), 90)
        time.sleep(1.5)
    elif args.kill == "body":  # mid-turn: the job's own body has streamed some text (a
        # request on the lane may be another CLI's: a spare body's, a model router's)
        _until(lambda: len(_deltas(client, job_id)) >= 2, 90)
    else:
        _until(lambda: len(_deltas(client, job_id)) >= 4, 90)
    session_id = client.job(job_id)["session_id"]
    native = client.session(session_id)["native_session_id"]
    handle = client.session(session_id)["transport"].get("body_handle") or {}
    killed = True
    if args.kill == "body":
        killed = _kill_launcher(work, handle, since)
        tally.missed += not killed
    else:
        _kill_daemon()
    if args.twice:
        _chorus(work, "start")
        time.sleep(0.3)  # the new daemon has just re-attached; the turn runs on
        _kill_daemon()
    with contextlib.suppress(subprocess.TimeoutExpired):
        _chorus(work, "watch", job_id, timeout=args.round_timeout)
    _score(DaemonClient(), job_id, session_id, words, handle, tally)
    turns = len(server.turn_requests(lane=lane)) - before
    tally.rerun += turns - 1
    shown = set("".join(_deltas(DaemonClient(), job_id)).split()) & set(words)
    print(f"{body} round {n}: {turns} turn request(s), {len(shown)}/{WORDS} words", file=sys.stderr)
    tally.left += _group_left(handle) if args.kill == "body" else 0
    now = DaemonClient().session(session_id)["native_session_id"]
    tally.fresh += args.kill == "body" and bool(native) and now != native
    if args.kill == "body":
        state = DaemonClient().job(job_id)["state"] if killed else "missed"
        _classify(body, n, state, native, now, session_id, tally)
    else:
        stop_daemon()


def _warm_session(work: Path, body: str, n: int) -> list[str]:
    """``--session ID`` of a new session of ``body`` with one turn done (``--warm``)."""
    done = _chorus(work, "ask", f"warm up {n}", "--body", body, "--json")
    first = json.loads(done.stdout.splitlines()[0])
    session_id = DaemonClient(autostart=False).job(first["job_id"])["session_id"]
    return ["--session", session_id]


def _classify(
    body: str,
    n: int,
    state: str,
    before: str | None,
    after: str | None,
    session_id: str,
    tally: Tally,
) -> None:
    """Score how a body-kill round ended: on the same native session, on a new one,
    or not at all; say so with the resume notices the session logged. A round where
    no launcher was found to kill is no sample (counted as ``missed`` only)."""
    notes = _resume_notes(session_id)
    rebuilt = any(m.startswith("rebuilt from the log") for m in notes)
    if state == "missed":
        print(f"{body} round {n}: missed (nothing killed)", file=sys.stderr)
        return
    if state != "succeeded":
        verdict = "failed"
    elif before and after == before and not rebuilt:
        verdict = "native"
    else:
        verdict = "new"
    setattr(tally, verdict, getattr(tally, verdict) + 1)
    why = "; ".join(notes) or "no resume notice"
    print(f"{body} round {n}: {verdict} (native id {before} -> {after}; {why})", file=sys.stderr)


def _resume_notes(session_id: str) -> list[str]:
    """The messages of the session's ``resume`` notices, in order."""
    with sqlite3.connect(_home() / "chorus.db") as conn:
        rows = conn.execute(
            "SELECT payload FROM events WHERE session_id = ? AND type = 'notice' ORDER BY seq",
            (session_id,),
        ).fetchall()
    notices = [json.loads(r[0]) for r in rows]
    return [str(p.get("message")) for p in notices if p.get("kind") == "resume"]


def _guarded(
    body: str, n: int, server: ModelServer, work: Path, args: argparse.Namespace, tally: Tally
) -> None:
    """One round; one that breaks (a CLI call timed out, the daemon did not answer)
    counts as failed and the bench goes on."""
    try:
        _round(body, n, server, work, args, tally)
    except Exception as exc:  # a bench round, reported
        tally.failed += 1
        print(f"{body} round {n}: failed ({type(exc).__name__}: {exc})", file=sys.stderr)
    print(f"  load {_load()}", file=sys.stderr)


def _lane(body: str) -> str:
    """The scripted model's lane (and model API) of ``body``."""
    return ACP_LANES.get(body) or CLI_OF.get(body, body)


def _acp_env(bodies: tuple[str, ...], server: ModelServer, root: Path) -> str:
    """Config lines giving each ACP adapter its CLI's offline env on that CLI's lane."""
    lines = []
    for body in bodies:
        if body in ACP_LANES:
            lane = ACP_LANES[body]
            env = offline_env(lane, root / f"{body}-home", server.lane_url(lane))  # type: ignore[arg-type]
            lines += [f"[agents.{body}.env]", *(f"{k} = {json.dumps(v)}" for k, v in env.items())]
    return "\n".join(lines)


def _score(
    client: DaemonClient,
    job_id: str,
    session_id: str,
    words: list[str],
    handle: dict[str, Any],
    tally: Tally,
) -> None:
    job = client.job(job_id)
    tally.completed += job["state"] == "succeeded"
    if job["state"] != "succeeded":
        print(f"job {job_id}: {job['state']} {job.get('error')}", file=sys.stderr)
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
    parser.add_argument("--clis", default="claude,codex,gemini", help="bodies, by name")
    parser.add_argument("--kill", choices=("daemon", "body"), default="daemon")
    parser.add_argument("--round-timeout", type=float, default=240, help="seconds per round")
    parser.add_argument(
        "--warm", action="store_true", help="kill in a session's second turn, not its first"
    )
    args = parser.parse_args()
    bodies = tuple(args.clis.split(","))
    clis = tuple(dict.fromkeys(_lane(b) for b in bodies))
    tallies: dict[str, Tally] = {}
    load_start = _load()
    with bench_home(clis) as (server, work, root):
        with (_home() / "config.toml").open("a") as config:
            config.write(_acp_env(bodies, server, root) + "\n")
        for body in bodies:
            tallies[body] = Tally()
            for n in range(args.rounds):
                _guarded(body, n, server, work, args, tallies[body])
        integrity = _integrity(_home())
    _report(args, tallies)
    print(f"PRAGMA integrity_check: {integrity}")
    print(f"load average at start {load_start}, at end {_load()}")


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _report(args: argparse.Namespace, tallies: dict[str, Tally]) -> None:
    mode = "twice (again just after the re-attach)" if args.twice else "once"
    victim = "the body's launcher" if args.kill == "body" else "the daemon"
    turn = "in a session's second turn" if args.warm else "in a new session's first turn"
    print(f"kill -9 of {victim} mid-turn {turn}, {mode} per round, {args.rounds} rounds per body")
    head = ("body", "completed", "lost", "dup", "re-run", "seq", "same pid", "left", "missed")
    print("{:16} {:>10} {:>5} {:>5} {:>7} {:>4} {:>9} {:>5} {:>6} {:>6}".format(*head, "fresh"))
    for body, t in tallies.items():
        done = f"{t.completed}/{args.rounds}"
        same = f"{t.same_pid}/{args.rounds}"
        print(
            f"{body:16} {done:>10} {t.lost:>5} {t.duplicated:>5} {t.rerun:>7}"
            f" {t.seq_faults:>4} {same:>9} {t.left:>5} {t.missed:>6} {t.fresh:>6}"
        )
    if args.kill == "body":
        print("resumed natively / resumed on a new native session / failed, per body:")
        for body, t in tallies.items():
            killed = args.rounds - t.missed
            print(f"{body:16} {t.native:>3} / {t.new:>3} / {t.failed:>3}  of {killed} killed")


if __name__ == "__main__":
    main()
