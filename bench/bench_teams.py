"""Teams, two figures in one run:

1. Parallel vs serial on the scripted model with slow streams: ``chorus team run`` of
   a claude member and a codex member (each reply streams ``--delay`` seconds), then
   the coordinator's synthesis, against the same two subtasks run one after the
   other as plain jobs, then the same synthesis job. Target: parallel / serial <= 0.55.
2. The mailbox under a crash: ``--messages`` messages between 4 members (4 sender
   and 4 reader threads over the daemon's API, each reader taking a batch, then
   acking it), with ``kill -9`` of the daemon half-way and a restart. Counts lost
   messages (sent, never acked) and messages delivered again after their ack.

    uv run python bench/bench_teams.py [--rounds 3] [--delay 6] [--messages 10000]
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import threading
import time
import uuid
from collections import Counter
from typing import Any

from _common import bench_home, summary

from chorus._errors import ChorusError
from chorus.client._lifecycle import read_pid
from chorus.daemon import DaemonClient, spawn_daemon
from chorus.testing import ModelServer, slow_text, text

MEMBERS = ("m1", "m2", "m3", "m4")


def _slow(content: str, delay: float) -> Any:
    return slow_text(content, chunks=10, delay=delay / 10)


def _job(client: DaemonClient, **fields: Any) -> tuple[dict[str, Any], float]:
    started = time.perf_counter()
    job = client.submit(**fields)
    while (rec := client.job(job["id"]))["state"] not in ("succeeded", "failed", "cancelled"):
        time.sleep(0.05)
    assert rec["state"] == "succeeded", rec
    return rec, time.perf_counter() - started


def _team_run(client: DaemonClient, work: str) -> float:
    started = time.perf_counter()
    body = {"task": "audit", "cwd": work, "assign": {"a": "part A", "b": "part B"}}
    run = client.call("POST", "/teams/duo/run", body)
    while True:
        state = client.call("GET", "/teams/duo")["run"]
        if state["id"] == run["id"] and state["state"] in ("done", "failed"):
            break
        time.sleep(0.05)
    assert state["state"] == "done", state
    return time.perf_counter() - started


def _serial(client: DaemonClient, work: str, sessions: dict[str, str]) -> float:
    total = 0.0
    for body in ("claude", "codex", "claude"):
        where = {"session_id": sessions[body]} if body in sessions else {"body": body, "cwd": work}
        rec, took = _job(client, prompt=f"part on {body}", **where)
        sessions.setdefault(body, rec["session_id"])
        total += took
    return total


def _script(server: ModelServer, delay: float) -> None:
    server.script([_slow("result A", delay), text("synthesis")], lane="claude")
    server.script([_slow("result B", delay)], lane="codex")


def parallel_vs_serial(rounds: int, delay: float) -> None:
    with bench_home(("claude", "codex"), extra="max_parallel_jobs = 4") as (server, work, _):
        spawn_daemon()
        client = DaemonClient(timeout=120)
        members = {"a": {"body": "claude"}, "b": {"body": "codex"}}
        team = {"name": "duo", "members": members, "coordinator": "claude", "persistent": True}
        client.call("POST", "/teams", team)
        sessions: dict[str, str] = {}
        par: list[float] = []
        ser: list[float] = []
        for n in range(rounds + 1):  # round 0 warms the bodies up and is not counted
            _script(server, delay)
            p = _team_run(client, str(work))
            _script(server, delay)
            s = _serial(client, str(work), sessions)
            if n:
                par.append(p)
                ser.append(s)
    ratio = statistics.median(par) / statistics.median(ser)
    print(f"team run, 2 members in parallel + synthesis : {summary(par)}")
    print(f"the same 2 subtasks serially + synthesis    : {summary(ser)}")
    print(
        f"parallel / serial = {ratio:.2f} (target <= 0.55; "
        f"replies: 10 chunks {delay / 10:g}s apart)"
    )


class _Mail:
    """What the threads saw: ids sent, deliveries, acks."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.sent: set[str] = set()
        self.deliveries: Counter[str] = Counter()
        self.acked: set[str] = set()
        self.after_ack = 0
        self.stop = threading.Event()


def _client() -> DaemonClient:
    """A thread's client: it never starts a daemon itself (the bench restarts it)."""
    return DaemonClient(autostart=False, timeout=30)


def _retry(call: Any) -> Any:
    """A call retried until the daemon answers again (it is killed once on purpose)."""
    while True:
        try:
            return call()
        except ChorusError:
            time.sleep(0.1)


def _sender(client: DaemonClient, mail: _Mail, me: str, count: int) -> None:
    others = [m for m in MEMBERS if m != me]
    for n in range(count):
        mid = uuid.uuid4().hex
        body = {"to": others[n % 3], "text": f"{me} #{n}", "from": me, "id": mid}
        _retry(lambda body=body: client.call("POST", "/teams/mail/send", body))
        with mail.lock:
            mail.sent.add(mid)


def _reader(client: DaemonClient, mail: _Mail, me: str) -> None:
    while not mail.stop.is_set():
        turn = uuid.uuid4().hex
        body = {"member": me, "job_id": turn}
        taken = _retry(lambda body=body: client.call("POST", "/teams/mail/inbox", body))
        if not taken:
            time.sleep(0.05)
            continue
        ids = [m["id"] for m in taken]
        with mail.lock:
            mail.after_ack += sum(1 for i in ids if i in mail.acked)
            mail.deliveries.update(ids)
        acked = _retry(lambda ids=ids: client.call("POST", "/teams/mail/ack", {"ids": ids}))
        with mail.lock:
            mail.acked.update(acked["acked"])


def _kill_and_restart(mail: _Mail, half: int) -> float:
    while len(mail.sent) < half:
        time.sleep(0.01)
    pid = read_pid()
    assert pid, "no daemon pid"
    os.kill(pid, signal.SIGKILL)
    killed = time.perf_counter()
    while _alive(pid):
        time.sleep(0.01)
    spawn_daemon()
    return time.perf_counter() - killed


def _alive(pid: int) -> bool:
    """Still running (a killed daemon this bench spawned is its child: reap it)."""
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        done = 0
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
    return done != pid


def mailbox_crash(messages: int) -> None:
    with bench_home(("claude",)) as (_server, _work, _):
        spawn_daemon()
        client = DaemonClient(timeout=30)
        members = {m: {"body": "claude"} for m in MEMBERS}
        client.call("POST", "/teams", {"name": "mail", "members": members, "persistent": True})
        mail = _Mail()
        per = messages // len(MEMBERS)
        started = time.perf_counter()
        senders = [
            threading.Thread(target=_sender, args=(_client(), mail, m, per)) for m in MEMBERS
        ]
        readers = [threading.Thread(target=_reader, args=(_client(), mail, m)) for m in MEMBERS]
        for thread in [*senders, *readers]:
            thread.start()
        down = _kill_and_restart(mail, per * len(MEMBERS) // 2)
        for thread in senders:
            thread.join()
        deadline = time.monotonic() + 300
        while len(mail.acked) < len(mail.sent) and time.monotonic() < deadline:
            time.sleep(0.1)
        mail.stop.set()
        for thread in readers:
            thread.join()
        took = time.perf_counter() - started
    lost = len(mail.sent - mail.acked)
    redelivered = sum(1 for c in mail.deliveries.values() if c > 1)
    print(
        f"mailbox: {len(mail.sent)} messages between {len(MEMBERS)} members in {took:.1f}s, "
        f"daemon kill -9 half-way (back in {down:.1f}s)"
    )
    print(f"  lost (sent, never acked)          : {lost}")
    print(f"  delivered again after their ack   : {mail.after_ack}")
    print(f"  redelivered before an ack (crash) : {redelivered}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--delay", type=float, default=6.0, help="seconds each reply streams")
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--skip-parallel", action="store_true")
    args = parser.parse_args()
    if not args.skip_parallel:
        parallel_vs_serial(args.rounds, args.delay)
    mailbox_crash(args.messages)


if __name__ == "__main__":
    main()
