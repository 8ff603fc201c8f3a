"""The everyday commands: ask, task, watch, steer, jobs, status, start, log and
sessions list.

Stdlib only until output reaches a terminal (then rich): these are what people
run most, so they talk to the daemon's socket before loading anything heavy; the
store (and pydantic) loads only when no daemon runs and the log must be read.
Both the fast argv path (``_fast``) and the typer commands call these functions,
which return the exit code: 0 succeeded, 1 failed, 2 bad input, 3 cancelled.

``ask`` and ``watch`` print in one of three formats: ``events`` (a line per
event, text streamed as it arrives; the default on a terminal), ``text`` (only
the final answer on stdout, notes on stderr; the default when piped) and
``json`` (the events as JSON lines, also ``--json``).

What a command needs only after its request is sent (``json``, the renderer) loads
then, while the daemon answers: ``--json`` passes the daemon's event lines through
as they are, and reads only the job's last one (``job_ended``), to stop there.
"""

from __future__ import annotations

import os
import sys
import time

from chorus._errors import ChorusError, UserError
from chorus.client import DaemonClient, DaemonLostError, NotRunningError

#: ``typing`` is not imported at run time: it costs the fast path milliseconds.
TYPE_CHECKING = False

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path
    from typing import Any

    from chorus.cli._progress import StatusLine
    from chorus.cli._render import Renderer

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_CANCELLED = 0, 1, 2, 3
FORMATS = ("text", "events", "json")
_NOTES = frozenset(
    {"notice", "retry_notice", "handoff", "turn_failed", "permission_request", "routed"}
)


def _tty() -> bool:
    return sys.stdout.isatty()


def pick_format(fmt: str | None, as_json: bool) -> str:
    if as_json:
        return "json"
    if fmt is None:
        return "events" if _tty() else "text"
    if fmt not in FORMATS:
        raise UserError(f"unknown format {fmt!r}: use one of {', '.join(FORMATS)}")
    return fmt


def exit_code(ended: dict[str, Any] | None) -> int:
    if ended is None:
        return EXIT_FAILED
    return {"succeeded": EXIT_OK, "cancelled": EXIT_CANCELLED}.get(ended["state"], EXIT_FAILED)


# -- printing a stream --------------------------------------------------------------------


class Answer:
    """The final answer of a job, from its events: the result of its end, or else the
    assistant text written after its last tool call (deltas or whole messages)."""

    def __init__(self) -> None:
        self.messages: dict[str, str] = {}
        self._anonymous = 0

    def feed(self, e: dict[str, Any]) -> None:
        kind = e.get("type")
        if kind == "tool_call":
            self.messages.clear()
        elif kind == "text_delta":
            key = e.get("message_id") or f"_{self._anonymous}"
            self.messages[key] = self.messages.get(key, "") + e.get("text", "")
        elif kind == "text":
            key = e.get("message_id") or f"_{self._anonymous}"
            self.messages[key] = e.get("text", "")
            self._anonymous += 0 if e.get("message_id") else 1

    def text(self, ended: dict[str, Any] | None) -> str:
        from chorus.cli._render import clean

        result = (ended or {}).get("result")
        return clean(result if result else "\n\n".join(self.messages.values())).strip()


class Printer:
    """Prints a stream of events (JSON text) in one format; remembers how it ended."""

    def __init__(self, fmt: str) -> None:
        self.fmt = fmt
        self.ended: dict[str, Any] | None = None
        self._seq = 0
        self._unread = ""  # json: the last line passed through, its seq not read yet
        self._answer = Answer()
        self._notes: Renderer | None = None
        self._renderer: Renderer | None = None
        self._status: StatusLine | None = None  # a live line on a terminal
        if fmt != "json":
            self._renderers(fmt)

    def _renderers(self, fmt: str) -> None:
        from chorus.cli._render import Renderer, plain_writer, rich_writer

        self._notes = Renderer(plain_writer(sys.stderr))
        if fmt == "events" and _tty():
            from chorus.cli._progress import StatusLine

            self._status = StatusLine(sys.stdout, rich_writer())
            self._renderer = Renderer(self._status.write)
            self._status.start()
        elif fmt == "events":
            self._renderer = Renderer(plain_writer())

    @property
    def last_seq(self) -> int:
        """The highest seq printed (a stream taken up again starts after it)."""
        if self._unread:
            self._see(_loads(self._unread))
            self._unread = ""
        return self._seq

    @last_seq.setter
    def last_seq(self, seq: int) -> None:
        self._seq, self._unread = seq, ""

    def _see(self, event: dict[str, Any]) -> None:
        self._seq = max(self._seq, int(event.get("seq") or 0))
        if event.get("type") == "job_ended":
            self.ended = event

    def feed(self, line: str) -> None:
        if self.fmt == "json":
            self._pass(line)
            return
        event = _loads(line)
        self._see(event)
        if self._renderer is not None:
            if self._status is not None:
                self._status.see(event)
            self._renderer.feed(event)
        else:
            self._text(event)

    def _pass(self, line: str) -> None:
        """``--json``: the daemon's line as it is; read only when it may be the end."""
        sys.stdout.write(line + "\n")
        sys.stdout.flush()
        self._unread = line
        if '"job_ended"' in line:
            self._see(_loads(line))

    def _text(self, event: dict[str, Any]) -> None:
        self._answer.feed(event)
        ended = event.get("type") == "job_ended"
        if self._notes is not None and (
            event.get("type") in _NOTES or (ended and event.get("state") != "succeeded")
        ):
            self._notes.feed(event)

    def finish(self) -> None:
        if self._renderer is not None:
            self._renderer.close()
        if self._status is not None:
            self._status.stop()
        if self.fmt == "text" and self.ended is not None:
            answer = self._answer.text(self.ended)
            if answer:
                sys.stdout.write(answer + "\n")
                sys.stdout.flush()


def _loads(line: str) -> Any:
    import json

    return json.loads(line)


#: How often a stream the daemon cut by going away is taken up again, and the pause.
RECONNECTS, RECONNECT_PAUSE_S = 3, 0.5


def follow(client: DaemonClient, job_id: str, printer: Printer) -> None:
    """Print the job's events from the printer's last seq until the job ends: its last
    event printed, it returns without waiting for the stream's own end. A stream
    cut because the daemon went away (a crash, a restart) is taken up again from the
    last seq printed, on the daemon in its place (started if need be)."""
    for left in range(RECONNECTS, -1, -1):
        try:
            _print_stream(client, job_id, printer)
            return
        except _StreamCutError as cut:
            if not left:
                exc = cut.__cause__
                raise DaemonLostError(f"lost the daemon: {exc}; the job may go on") from exc
            time.sleep(RECONNECT_PAUSE_S)


class _StreamCutError(Exception):
    """The daemon cut the stream (its cause says how); a closed stdout is not this."""


def _print_stream(client: DaemonClient, job_id: str, printer: Printer) -> None:
    """One stream of the job's events, printed until its end or the job's."""
    lines = client.event_lines(job_id, from_seq=printer.last_seq + 1)
    try:
        for line in _uncut(lines):
            printer.feed(line)
            if printer.ended is not None:
                return
    finally:
        lines.close()  # the connection too, at once


def _uncut(lines: Iterator[str]) -> Iterator[str]:
    """``lines``, with a reset or broken connection said as :class:`_StreamCutError`
    (a closed stdout, raised where a line is printed, stays a ``BrokenPipeError``:
    the command ends quietly with 141, as a piped shell tool does)."""
    try:
        yield from lines
    except (ConnectionResetError, BrokenPipeError) as exc:
        raise _StreamCutError from exc


def _stream_to_end(client: DaemonClient, job_id: str, printer: Printer) -> int:
    try:
        follow(client, job_id, printer)
    finally:
        printer.finish()
    if printer.ended is None:
        note(f"the stream ended before job {job_id} did; follow it with `chorus watch {job_id}`")
    return exit_code(printer.ended)


def _dumps(value: Any, **options: Any) -> str:
    import json

    return json.dumps(value, **options)


def note(message: str) -> None:
    sys.stderr.write(message + "\n")
    sys.stderr.flush()


# -- the commands --------------------------------------------------------------------------


def submit(prompt: str, opts: dict[str, Any]) -> dict[str, Any]:
    """Queue a job. A running daemon checks the body, its CLI and the folder (400, exit
    2); with none running they are checked here first, so bad input starts nothing."""
    request = {
        "prompt": prompt,
        "body": opts.get("body"),
        "model": opts.get("model"),
        "cwd": None,
        "session_id": opts.get("session"),
        "permission_mode": opts.get("mode"),
        **opts.get("request", {}),
    }
    if request["session_id"] is None:
        request["cwd"] = os.path.realpath(os.path.expanduser(opts.get("cwd") or os.getcwd()))
    try:
        return DaemonClient(autostart=False).submit(**request)
    except NotRunningError:
        _check_framework(request)
        _check_before_start(request["body"], request["cwd"], prompt)
    return DaemonClient().submit(**request)


def _check_before_start(body: str | None, cwd: str | None, prompt: str = "") -> None:
    """The daemon's own checks, before starting it (loads the config and the bodies)."""
    from chorus.bodies import check_installed
    from chorus.client import load_checked_config, prompt_problem
    from chorus.config import load_config

    config = load_config()
    problem = prompt_problem(prompt, config.daemon.max_prompt_bytes)
    if problem is not None:  # checked first: nothing is written for it
        raise UserError(problem)
    if body is not None:
        check_installed(body, config)
    if cwd is not None and not os.path.isdir(cwd):
        raise UserError(f"working directory {cwd} does not exist")
    load_checked_config()


def _check_framework(request: dict[str, Any]) -> None:
    """The daemon's framework check (unknown framework, planner or reviewer: exit 2)."""
    if request.get("framework") in (None, "direct"):
        return
    from chorus.bodies import body_names
    from chorus.config import load_config
    from chorus.frameworks import framework_options

    get = request.get
    known = body_names(load_config())
    framework_options(get("framework"), get("planners"), get("reviewer"), get("rounds"), known)


def ask(prompt: str, opts: dict[str, Any], fmt: str | None = None, as_json: bool = False) -> int:
    from chorus.cli._stdin import job_prompt

    prompt = job_prompt(prompt)
    fmt = pick_format(fmt, as_json)  # a bad one is refused before the job is sent
    client = DaemonClient()
    job = submit(prompt, opts)
    printer = Printer(fmt)  # the renderer loads once the job is on its way
    if printer.fmt == "text":
        note(f"job {job['id'][:12]} queued")
    try:
        return _stream_to_end(client, job["id"], printer)
    except KeyboardInterrupt:
        client.interrupt(job["id"])
        return _stream_to_end(client, job["id"], printer)


def task(prompt: str, opts: dict[str, Any], as_json: bool = False) -> int:
    from chorus.cli._stdin import job_prompt

    job = submit(job_prompt(prompt), opts)
    print(_dumps(job) if as_json else job["id"])
    return EXIT_OK


def watch(job_id: str | None, fmt: str | None = None, as_json: bool = False) -> int:
    printer = Printer(pick_format(fmt, as_json))
    client = DaemonClient()
    job_id = job_id or _newest_job(client)
    try:
        return _stream_to_end(client, job_id, printer)
    except KeyboardInterrupt:
        note(f"detached from {job_id}; it goes on")
        return EXIT_OK


def _newest_job(client: DaemonClient) -> str:
    all_jobs = client.jobs()
    if not all_jobs:
        raise UserError("there are no jobs to watch")
    running = [j for j in all_jobs if j["state"] in ("running", "queued")]
    return str((running or all_jobs)[-1]["id"])


def steer(job_id: str, text: str, as_json: bool = False) -> int:
    """Add text to a job's running turn; the daemon says how it got there."""
    if not text.strip():
        raise UserError("the steer text is empty")
    try:
        answer = DaemonClient(autostart=False).steer(job_id, text)
    except NotRunningError:  # no daemon: an unknown job is refused before one starts
        if not any(j["id"].startswith(job_id) for j in _stored_jobs(None)):
            raise UserError(f"unknown job {job_id!r}") from None
        answer = DaemonClient().steer(job_id, text)
    if as_json:
        print(_dumps(answer))
        return EXIT_OK
    how = {
        "native": "steered into the running turn",
        "emulated": "turn interrupted and restarted with your text",
        "queued_followup": "the job had finished: queued as a follow-up",
        "added_to_prompt": "the job was queued: added to its prompt",
    }.get(str(answer.get("how")), str(answer.get("how")))
    tail = f" as job {answer['followup_job_id']}" if answer.get("followup_job_id") else ""
    seq = f" (event {answer['seq']})" if answer.get("seq") is not None else ""
    print(f"{answer.get('job_id', job_id)}: {how}{tail}{seq}")
    return EXIT_OK


# -- reading: never starts a daemon --------------------------------------------------------


def jobs(state: str | None = None, as_json: bool = False) -> int:
    try:
        rows = DaemonClient(autostart=False).jobs(state)
    except NotRunningError:
        rows = _stored_jobs(state)
    if as_json:
        print(_dumps(rows))
        return EXIT_OK
    if not rows:
        print("no jobs" + (f" in state {state}" if state else ""))
        return EXIT_OK
    print(job_table(rows, _width()))
    return EXIT_OK


def _stored_jobs(state: str | None) -> list[dict[str, Any]]:
    """Jobs read from the log itself while no daemon runs (loads the store, if any)."""
    from chorus.client import chorus_home

    if not (chorus_home() / "chorus.db").exists():
        return []
    from chorus.cli._offline import stored_jobs

    return stored_jobs(state)


def log(job_id: str, as_json: bool = False) -> int:
    """A job's events so far, without following (never starts a daemon); given a
    session, the whole session's: job by job and the turns had in `chorus talk`."""
    try:
        lines = _job_lines(job_id)
    except UserError:  # no such job: a session, or neither (said by the session path)
        from chorus.cli._log import is_session, print_session

        if not is_session(job_id):
            raise
        print_session(job_id, as_json)
        return EXIT_OK
    printer = Printer("json" if as_json else "events")
    for line in lines:
        printer.feed(line)
    printer.finish()
    return EXIT_OK


def _job_lines(job_id: str) -> list[str]:
    try:
        return list(DaemonClient(autostart=False).event_lines(job_id, follow=False))
    except NotRunningError:
        from chorus.cli._offline import stored_events

        return stored_events(job_id)


#: The most sessions the daemon's ``GET /sessions`` lists (newest first).
_DAEMON_SESSIONS = 100


def sessions_list(limit: int = 50, as_json: bool = False) -> int:
    """Recorded sessions, newest first: from the daemon when one runs (it lists the
    newest 100), else (or for more) from the log itself."""
    rows = _sessions(limit)
    if as_json:
        print(_dumps(rows, ensure_ascii=False))
        return EXIT_OK
    from chorus.cli._render import session_table

    session_table(rows, short_ids([r["id"] for r in rows]))
    return EXIT_OK


def _sessions(limit: int) -> list[dict[str, Any]]:
    if 0 <= limit <= _DAEMON_SESSIONS:
        try:
            return DaemonClient(autostart=False).sessions()[:limit]
        except NotRunningError:
            pass
    from chorus.cli._offline import stored_sessions

    return stored_sessions(limit)


def _width() -> int:
    try:
        return os.get_terminal_size(sys.stdout.fileno()).columns
    except OSError:
        return 120


def short_ids(ids: list[str], least: int = 8) -> dict[str, str]:
    """Each id cut to the shortest prefix (at least ``least`` characters) no other shares."""
    out: dict[str, str] = {}
    for one in ids:
        size = least
        while size < len(one) and any(o != one and o.startswith(one[:size]) for o in ids):
            size += 1
        out[one] = one[:size]
    return out


def _credited(row: dict[str, Any]) -> str:
    """The body credited with a job, and those it failed over from: ``codex (after
    claude)``."""
    body = str(row.get("body") or "-")
    left = row.get("failed_over_from") or []
    return f"{body} (after {', '.join(map(str, left))})" if left else body


def job_table(rows: list[dict[str, Any]], width: int) -> str:
    ids = short_ids([r["id"] for r in rows])
    sids = short_ids(sorted({r["session_id"] for r in rows if r.get("session_id")}))
    cells = [
        [
            ids[r["id"]],
            r.get("status") or r["state"],  # waiting / flagged from the daemon
            _credited(r),
            sids.get(r.get("session_id") or "", "-"),
        ]
        for r in rows
    ]
    head = ["job", "state", "body", "session"]
    if any(r.get("node") for r in rows):  # the worker node that ran it
        head.append("node")
        for cell, row in zip(cells, rows, strict=True):
            cell.append(row.get("node") or "-")
    sizes = [max(len(c[i]) for c in [head, *cells]) for i in range(len(head))]
    room = max(10, width - sum(sizes) - 5)
    lines = []
    for cell, line_row in zip([head, *cells], [None, *rows], strict=True):
        prompt = "prompt" if line_row is None else " ".join(str(line_row["prompt"]).split())
        prompt = prompt if len(prompt) <= room else prompt[: room - 1] + "…"
        lines.append(" ".join(c.ljust(s) for c, s in zip(cell, sizes, strict=True)) + " " + prompt)
    return "\n".join(lines)


def start(as_json: bool = False) -> int:
    """Start the daemon and return once it serves (the daemon checks the config and
    policy itself: a bad one exits 2 naming the key, nothing started)."""
    from chorus.client._lifecycle import spawn_with_facts

    pid, facts = spawn_with_facts()
    gateway = facts if facts is not None else _gateway_status()
    if as_json:
        tcp = {"gateway_tcp": gateway.get("tcp"), "gateway_tcp_error": gateway.get("tcp_error")}
        print(_dumps({"pid": pid, **tcp}))
        return EXIT_OK
    print(f"daemon running (pid {pid})")
    if gateway.get("tcp_error"):  # the unix socket works; remote brains cannot connect
        sys.stderr.write(
            f"warning: the TCP gateway is off: {gateway['tcp_error']}\n"
            "change [gateway] port in config.toml (or set tcp = false), then chorus stop\n"
        )
    return EXIT_OK


def _gateway_status() -> dict[str, Any]:
    """The gateway's status from a daemon that was already running ({} if it is gone)."""
    try:
        gateway = DaemonClient(autostart=False).call("GET", "/gateway/status")
    except ChorusError:
        return {}
    return gateway if isinstance(gateway, dict) else {}


def stop(cancel_jobs: bool = False, keep_bodies: bool = False, as_json: bool = False) -> int:
    """Stop the daemon; say which jobs are left (with ``cancel_jobs``: cancel them
    first), and end the agent CLIs a daemon left running unless ``keep_bodies``."""
    from chorus.client import end_bodies_left, stop_daemon

    left, cancelled = _jobs_left(cancel_jobs)
    if keep_bodies:
        _keep_flag().touch()
    stopped = stop_daemon()
    if not stopped:
        _keep_flag().unlink(missing_ok=True)  # nothing to keep: no daemon ran
    ended = 0 if keep_bodies else end_bodies_left()
    if as_json:
        out = {"stopped": stopped, "left": left, "cancelled": cancelled, "ended_bodies": ended}
        print(_dumps({**out, "kept_bodies": keep_bodies and stopped}))
        return EXIT_OK
    print("\n".join(_stop_lines(stopped, keep_bodies, ended, left, cancelled)))
    return EXIT_OK


def _stop_lines(
    stopped: bool, keep_bodies: bool, ended: int, left: list[str], cancelled: list[str]
) -> list[str]:
    lines = ["daemon stopped" if stopped else "no daemon was running"]
    if keep_bodies and stopped:
        lines.append("agent CLIs left running; the next start re-attaches to them")
    if ended:
        lines.append(f"ended {ended} agent CLI(s) a daemon had left running")
    if cancelled:
        lines.append(f"cancelled {len(cancelled)} job(s): {' '.join(i[:12] for i in cancelled)}")
    if left:
        lines.append(
            f"{len(left)} job(s) left unfinished, they resume at the next start"
            f" (`chorus start`; or `chorus stop --cancel-jobs`): {' '.join(i[:12] for i in left)}"
        )
    return lines


def _keep_flag() -> Path:
    """``run/keep-bodies`` (``chorus.session.keep_flag``, without loading the session
    package): while it exists a stopping daemon leaves its bodies running."""
    from chorus.client import chorus_home

    home = chorus_home()  # made 0700 (tightened if others could enter), as run_dir() does
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    if home.stat().st_mode & 0o077:
        os.chmod(home, 0o700)
    run = home / "run"
    run.mkdir(exist_ok=True, mode=0o700)
    return run / "keep-bodies"


def _jobs_left(cancel: bool) -> tuple[list[str], list[str]]:
    """Ids of the running and queued jobs; with ``cancel``, (still open, cancelled)."""
    client = DaemonClient(autostart=False)
    try:
        open_jobs = [j["id"] for j in client.jobs() if j["state"] in ("running", "queued")]
    except NotRunningError:
        return [], []
    if not cancel:
        return open_jobs, []
    left, deadline = open_jobs, time.monotonic() + 30
    while left and time.monotonic() < deadline:
        for job_id in left:  # again while a job is between states (starting, resuming)
            client.interrupt(job_id)
        time.sleep(0.5)
        left = _open_jobs(client, left)
    cancelled = [j for j in open_jobs if client.job(j)["state"] == "cancelled"]
    return left, cancelled


def _open_jobs(client: DaemonClient, ids: list[str]) -> list[str]:
    return [j for j in ids if client.job(j)["state"] in ("running", "queued")]


def interrupt(job_id: str, as_json: bool = False) -> int:
    """Interrupt a running job (or cancel a queued one)."""
    answer = DaemonClient().interrupt(job_id)
    print(_dumps(answer) if as_json else answer["result"])
    return EXIT_OK


def status(as_json: bool = False) -> int:
    client = DaemonClient(autostart=False)
    try:  # both asked at once: one wait for the daemon instead of two
        data, gateway = client.call_all(("GET", "/status"), ("GET", "/gateway/status"))
    except NotRunningError:
        return _status_from_log(as_json)
    data["daemon"] = "running"
    data["gateway"] = gateway
    if as_json:
        print(_dumps(data, indent=2))
        return EXIT_OK
    print("\n".join(status_lines(data, time.time())))
    return EXIT_OK


def _status_from_log(as_json: bool) -> int:
    """``status`` with no daemon: the bodies and their health as the log knows them."""
    from chorus.cli._offline import offline_status

    data = offline_status()
    if as_json:
        print(_dumps(data, indent=2))
        return EXIT_OK
    counts = data["jobs"]
    jobs_line = ", ".join(f"{n} {state}" for state, n in sorted(counts.items())) or "none yet"
    lines = ["daemon: not running (start it with `chorus start`); read from the log:"]
    lines += [f"jobs: {jobs_line}", "bodies:"]
    lines += [f"  {line}" for line in _body_lines(data, time.time())]
    print("\n".join(lines))
    return EXIT_OK


def status_lines(data: dict[str, Any], now: float) -> list[str]:
    counts = data.get("jobs") or {}
    jobs_line = ", ".join(f"{n} {state}" for state, n in sorted(counts.items())) or "none yet"
    lines = [f"daemon: running (pid {data['pid']}, up {_age(now - data['started_at'])})"]
    lines.append(f"jobs: {jobs_line}")
    lines += ["bodies:", *(f"  {line}" for line in _body_lines(data, now))]
    lines.append(f"gateway: {_gateway_line(data.get('gateway') or {})}")
    if dash := data.get("dashboard"):  # its url, or why it does not listen
        lines.append(f"dashboard: {dash.get('url') or 'off: ' + str(dash.get('problem'))}")
    paused = data.get("paused_sessions") or []
    lines.append("paused sessions: " + (", ".join(s[:12] for s in paused) if paused else "none"))
    flags = data.get("pending_flags") or []
    shown = ", ".join(flags[:5]) + (" …" if len(flags) > 5 else "")
    lines.append(f"pending flags: {shown} (chorus flags)" if flags else "pending flags: none")
    if "pending_retries" in data:  # the routines' retry queue
        lines.append(f"pending retries: {data['pending_retries']}")
    if "next_routine" in data:
        nxt = data["next_routine"]
        when = f"{nxt['name']} in {_age(nxt['at'] - now)}" if nxt else "none scheduled"
        lines.append(f"next routine: {when}")
    if "spend_today" in data:  # [budget]
        lines.append(f"spend today: {_spend_line(data['spend_today'], data.get('budget') or {})}")
    lines += node_lines(data, now)
    return lines


def node_lines(data: dict[str, Any], now: float) -> list[str]:
    """The worker nodes sharing the store and what each runs; why no job is taken."""
    nodes = data.get("nodes") or []
    here = (data.get("node") or {}).get("id")
    lines = ["nodes:" if nodes else "nodes: none registered yet"]
    for node in nodes:
        runs = ", ".join(j[:8] for j in node.get("running") or []) or "nothing"
        mark = " (this daemon)" if node["id"] == here else ""
        seen = _age(max(0.0, now - float(node["last_seen"])))
        lines.append(f"  {node['id']}{mark} on {node['host']}, seen {seen} ago: runs {runs}")
    if data.get("store_outage"):
        lines.append(f"store: {data['store_outage']}")
    if data.get("accepting_jobs") is False:
        lines.append("not accepting new jobs until the database is back")
    if len(nodes) > 1 and data.get("routines_leader") is not None:
        leads = "this daemon fires them" if data["routines_leader"] else "another node fires them"
        lines.append(f"routines: {leads}")
    return lines


def usd(amount: float) -> str:
    """Dollars with cents, or four decimals below a cent."""
    return f"${amount:.2f}" if amount >= 0.01 or amount == 0 else f"${amount:.4f}"


def _spend_line(spend: dict[str, Any], budget: dict[str, Any]) -> str:
    limit = f" of {usd(budget['daily_usd'])} (daily_usd)" if budget.get("daily_usd") else ""
    caps = budget.get("bodies") or {}
    parts = [
        f"{body} {usd(spent)}" + (f" of {usd(caps[body])}" if body in caps else "")
        for body, spent in sorted((spend.get("bodies") or {}).items())
    ]
    return f"{usd(float(spend.get('usd') or 0))}{limit}" + (
        f" ({', '.join(parts)})" if parts else ""
    )


def _age(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m"
    if seconds < 172800:
        return f"{seconds / 3600:.1f}h"
    return f"{seconds / 86400:.1f}d"


def _body_lines(data: dict[str, Any], now: float) -> list[str]:
    health = data.get("health") or []
    names = list(data.get("router_bodies") or [])
    names += [h["key"].split("@")[0] for h in health if h["key"].split("@")[0] not in names]
    missing = data.get("needs_login") or {}
    lines = []
    for name in names:
        rows = [h for h in health if h["key"].split("@")[0] == name]
        if name in missing:
            lines.append(f"{name}: {missing[name]}")
        elif not rows:
            lines.append(f"{name}: healthy, no data yet")
        lines += [f"{name}: {_health_line(row, now)}" for row in rows]
        lines += quota_lines(data.get("quota") or {}, name, now)
        if why := (data.get("unmetered") or {}).get(name):
            lines.append(f"  unmetered: {why}; its usage is what the CLI reports")
    return lines or ["none configured ([router] bodies)"]


def quota_lines(quota: dict[str, Any], body: str, now: float) -> list[str]:
    """What ``body``'s provider last said of its quota (the meter read it)."""
    if not quota:  # the meter is off (the default): nothing to load for it
        return []
    from chorus.bodies import CLI_OF
    from chorus.meter import API_OF_CLI

    api = API_OF_CLI.get(CLI_OF.get(body, body))
    entry = quota.get(api or "")
    if not entry:
        return []
    windows = "; ".join(_window(name, w, now) for name, w in sorted(entry["windows"].items()))
    said = _age(max(0.0, now - float(entry["at"])))
    return [f"  quota ({api}, said {said} ago): {windows}"]


def _window(name: str, window: dict[str, Any], now: float) -> str:
    left, limit, reset = window.get("remaining"), window.get("limit"), window.get("reset_at")
    amount = f"{left if left is not None else '?'}" + (f"/{limit}" if limit is not None else "")
    resets = f", resets in {_age(max(0.0, float(reset) - now))}" if reset is not None else ""
    return f"{name} {amount} left{resets}"


def _health_line(row: dict[str, Any], now: float) -> str:
    account = row["key"].split("@", 1)[1] if "@" in row["key"] else "default"
    account = "own login" if account == "default" else f"key {account}"
    outcomes = row.get("outcomes") or []
    rate = f"success {sum(outcomes) / len(outcomes):.0%} of last {len(outcomes)}"
    left = float(row.get("cooldown_until") or 0) - now
    told = " (until the provider's reset)" if row.get("reset_from_provider") else ""
    cooling = f", cooling down {_age(left)} more{told}" if left > 0 else ""
    low = float(row.get("low_until") or 0) - now
    cooling += f", nearly out: routed around for {_age(low)}" if low > 0 else ""
    state = "healthy" if row.get("quota_state") in (None, "ok") else str(row["quota_state"])
    return f"{state} ({account}), {rate if outcomes else 'no data yet'}{cooling}"


def _gateway_line(gw: dict[str, Any]) -> str:
    if gw.get("tcp"):
        return f"{gw['tcp']} (token: `chorus gateway token`)"
    if gw.get("tcp_error"):
        return f"off: {gw['tcp_error']}"
    return "off: unix socket only ([gateway] tcp = false)"
