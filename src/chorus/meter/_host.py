"""The daemon's side of the meter's process (``_process``): find it or start it, and
keep the link to it.

:meth:`MeterHost.open` is quick and never waits: a meter process still running from
an earlier daemon (its ``pid`` file names a live process that started when it says)
is adopted; otherwise the loopback port (kept in ``meter/port``) is bound here,
so bodies can be pointed at it at once, and :meth:`MeterHost.run` starts the process
with that socket (a request that comes first waits in the listen queue). ``run``
then keeps the link: on each connect it says hello (the secrets, the verdicts), reads
the spool from the offset last stored (the records made while no daemon listened),
then takes the records as they come and answers each ``admit`` (asked only while
``budgets`` says a budget is set). While one is, the budget is pushed to the meter
rather than asked for each request: the ``verdict`` of each session the meter asked
about, again after each batch of records taken (with the offset taken, which the
meter's next request waits for) and whenever a verdict changes otherwise (other
spend, a reload: looked at every :data:`BUDGET_S`). A meter process that dies is
started again on the same port. Each record is handed to ``ingest``, which
may return a future that settles once the record is kept: its offset is then stored
(``meter/ingested``, once per turn of the loop for the records kept in it), so a
record is read again after a crash rather than lost, and the window in which a
crash reads a kept record again stays a turn of the loop wide.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from chorus.meter._process import meter_dir, start_time
from chorus.meter._spool import read_spool
from chorus.meter._unix import socket_path

log = logging.getLogger("chorus.meter")

HOST = "127.0.0.1"
#: How often the secrets and budgets' presence are looked at for a change to tell
#: the meter.
RETELL_S = 2.0
#: The offset the spool was read to is written this long after it moved (0: at the
#: loop's next turn, one write for the records kept meanwhile). Longer saves writes
#: but widens the window in which a daemon's crash logs a kept record twice.
OFFSET_S = 0.0
#: How often the sessions' verdicts are looked at for a change to push to the meter.
BUDGET_S = 0.25
_RETELL_TICKS = max(1, round(RETELL_S / BUDGET_S))
#: The sessions whose verdicts are pushed (the ones asked about most lately).
MAX_SESSIONS = 256
#: Ingest a record: (the record) → a future settled once it is kept, or None.
Ingest = Callable[[dict[str, Any]], "asyncio.Future[Any] | None"]
#: May this session's request go to this API: None, or why not.
Admit = Callable[[str, str], str | None]


class MeterHost:
    """One daemon's hold on the meter's process under ``run`` (CHORUS_HOME/run)."""

    def __init__(
        self,
        run: Path,
        ingest: Ingest,
        admit: Admit,
        secrets: Callable[[], Mapping[str, str]],
        orphan_s: float = 900.0,
        budgets: Callable[[], bool] = lambda: True,
        verdict: Admit | None = None,
    ) -> None:
        """``admit`` answers the meter's question (and may act on a refusal: the
        daemon ends the job); ``verdict`` is the same answer without acting on it
        (the pushed ones; ``admit`` when not given)."""
        self.run_dir, self.dir = run, meter_dir(run)
        self.ingest, self.admit, self.secrets = ingest, admit, secrets
        self.verdict = verdict or admit
        self.budgets = budgets
        self.orphan_s = orphan_s
        self.port = 0
        self._sock: socket.socket | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._seen = self._stored = self._read_offset()
        self._offset_timer: asyncio.TimerHandle | None = None
        self._verdicts: dict[str, str | None] = {}
        #: The sessions asked about (their verdicts pushed), with the API asked for.
        self._asked: dict[str, str] = {}
        self._pushed: dict[str, str | None] = {}
        self._push_soon = False
        self._ask = False  # whether the meter was told a budget is set
        self._closing = False
        self._task: asyncio.Task[None] | None = None
        self._linked_once: asyncio.Event | None = None

    # -- finding or making the process --------------------------------------------------

    def open(self) -> int:
        """The meter's port: the running process's, or one bound now for a new one."""
        self.dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        running = self._running()
        if running is not None:
            self.port = running
            return running
        self._sock = _bind(self.dir / "port")
        self.port = int(self._sock.getsockname()[1])
        return self.port

    def _running(self) -> int | None:
        try:
            data = json.loads((self.dir / "pid").read_text())
            pid, started, port = int(data["pid"]), data["started"], int(data["port"])
        except (OSError, ValueError, KeyError, TypeError):
            return None
        return port if started is not None and start_time(pid) == started else None

    def _alive(self) -> bool:
        if self._proc is not None:
            return self._proc.poll() is None
        return self._running() is not None

    async def _start(self) -> None:
        """Start the process on the bound socket (in a thread: a fork is not free)."""
        if self._sock is None:
            self._sock = _bind(self.dir / "port", self.port)
        sock, self._sock = self._sock, None
        try:
            self._proc = await asyncio.to_thread(self._spawn, sock)
        finally:
            sock.close()

    def _spawn(self, sock: socket.socket) -> subprocess.Popen[bytes]:
        fd = sock.fileno()
        where = [str(self.run_dir), str(fd), str(self.orphan_s)]
        args = [sys.executable, "-m", "chorus.meter", *where]
        with (self.dir / "log").open("ab") as out:
            return subprocess.Popen(
                args,
                pass_fds=(fd,),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=out,
                start_new_session=True,  # not in the daemon's group: it outlives a kill
            )

    # -- the link -----------------------------------------------------------------------

    def start(self) -> None:
        """:meth:`run` in a task of its own, until :meth:`close`."""
        self._task = asyncio.create_task(self.run(), name="meter-link")

    async def linked(self) -> None:
        """Return once the meter's process has taken this daemon's hello (it asks this
        daemon from then on: tests, the bench)."""
        await self._event().wait()

    def _event(self) -> asyncio.Event:
        if self._linked_once is None:
            self._linked_once = asyncio.Event()
        return self._linked_once

    async def run(self) -> None:
        """Start the process if ``open`` bound its port; then keep the link, forever."""
        if self._sock is not None:
            await self._start()
        while not self._closing:
            try:
                with socket_path(self.dir / "link.sock") as where:
                    reader, writer = await asyncio.open_unix_connection(where)
            except OSError:
                await self._absent()
                continue
            await self._linked(reader, writer)

    async def _absent(self) -> None:
        if not self._alive():
            log.warning("meter: its process is gone; starting another on port %s", self.port)
            await self._start()
        await asyncio.sleep(0.05)

    async def _linked(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writer = writer
        told = asyncio.create_task(self._retell(), name="meter-retell")
        try:
            self._catch_up()
            while line := await reader.readline():
                self._heard(line)
        except (OSError, ValueError) as exc:
            log.warning("meter: the link broke: %s", type(exc).__name__)
        finally:
            told.cancel()
            self._writer = None
            writer.close()

    async def _retell(self) -> None:
        """Say hello, then again whenever the secrets or the budgets' presence change
        (a ``chorus secret set``, a reload): looked at every :data:`RETELL_S`; push the
        verdicts that changed, looked at every :data:`BUDGET_S`."""
        said = self._hello("hello")
        self._send(said)
        for tick in itertools.count(1):
            await asyncio.sleep(BUDGET_S)
            if tick % _RETELL_TICKS == 0:
                said = self._retold(said)
            if self._ask and self._sessions() != self._pushed:
                self._push()

    def _retold(self, said: dict[str, Any]) -> dict[str, Any]:
        """Tell the meter the secrets and whether a budget is set, when they changed."""
        now = self._hello("secrets")
        if (now["secrets"], now["ask"]) == (said["secrets"], said["ask"]):
            return said
        self._send(now)
        if self._ask:  # a budget set now: the records sent so far are taken
            self._push()
        return now

    def _catch_up(self) -> None:
        while batch := read_spool(self.dir / "records.jsonl", self._seen):
            for end, record in batch:
                self._take(end, record)

    def _heard(self, line: bytes) -> None:
        message = json.loads(line)
        if message.get("op") == "record":
            self._take(int(message["end"]), dict(message["record"]))
            self._push_after()
        elif message.get("op") == "ready":
            self._event().set()
        elif message.get("op") == "admit":
            self._answer(message)

    def _answer(self, message: dict[str, Any]) -> None:
        channel, api = str(message.get("channel")), str(message.get("api"))
        why = self.admit(channel, api)
        self._verdicts[channel] = why
        self._asked.pop(channel, None)
        self._asked[channel] = api  # the latest last: the oldest go first
        while len(self._asked) > MAX_SESSIONS:
            del self._asked[next(iter(self._asked))]
        self._send({"op": "verdict", "id": message.get("id"), "channel": channel, "why": why})

    # -- the budget, pushed ---------------------------------------------------------------

    def _sessions(self) -> dict[str, str | None]:
        """The verdict of each session asked about, as it stands."""
        return {channel: self.verdict(channel, api) for channel, api in self._asked.items()}

    def _push_after(self) -> None:
        """Push once the records read at once are all taken (one push for a batch)."""
        if self._ask and not self._push_soon:
            self._push_soon = True
            asyncio.get_running_loop().call_soon(self._push)

    def _push(self) -> None:
        """The sessions' verdicts and the offset of the records taken (the meter's next
        request waits for it: then the verdicts count those records)."""
        self._push_soon = False
        self._pushed = self._sessions()
        self._send({"op": "budget", "upto": self._seen, "sessions": self._pushed})

    def _take(self, end: int, record: dict[str, Any]) -> None:
        if end <= self._seen:
            return  # read from the spool already
        self._seen = end
        try:
            kept = self.ingest(record)
        except Exception:  # one bad record must not stop the link
            log.exception("meter: a record could not be taken")
            kept = None
        if kept is None:
            self._store_offset(end)
        else:
            kept.add_done_callback(lambda _: self._store_offset(end))

    def _send(self, message: Mapping[str, Any]) -> None:
        if self._writer is not None and not self._writer.is_closing():
            self._writer.write((json.dumps(message, separators=(",", ":")) + "\n").encode())

    def _hello(self, op: str) -> dict[str, Any]:
        secrets = dict(self.secrets())
        self._ask = self.budgets()
        hello = {"op": op, "secrets": secrets, "verdicts": self._verdicts, "ask": self._ask}
        if op == "hello":  # this daemon pushes its verdicts (an older one did not)
            self._pushed = self._sessions() if self._ask else {}
            hello |= {"push": True, "upto": self._seen, "sessions": self._pushed}
        return hello

    # -- offsets ------------------------------------------------------------------------

    def _read_offset(self) -> int:
        try:
            return int((self.dir / "ingested").read_text().strip())
        except (OSError, ValueError):
            return 0

    def _store_offset(self, end: int) -> None:
        """Keep ``end`` as the offset read to: written within :data:`OFFSET_S` (one
        write for the records kept meanwhile; a crash before it reads them again)."""
        if end <= self._stored:
            return
        self._stored = end
        if self._offset_timer is None:
            loop = asyncio.get_running_loop()
            self._offset_timer = loop.call_later(OFFSET_S, self._write_offset)

    def _write_offset(self) -> None:
        self._offset_timer = None
        tmp = self.dir / f".ingested.{os.getpid()}"
        with contextlib.suppress(OSError):
            tmp.write_text(f"{self._stored}\n")
            tmp.replace(self.dir / "ingested")

    # -- the end ------------------------------------------------------------------------

    async def close(self, *, keep: bool) -> None:
        """Stop linking; unless ``keep`` (bodies are left running), stop the process."""
        self._closing = True
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        if not keep:
            self._send({"op": "exit"})
        if self._writer is not None:
            with contextlib.suppress(OSError):
                await self._writer.drain()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._offset_timer is not None:  # the offset read to, kept now
            self._offset_timer.cancel()
            self._write_offset()
        if self._proc is None:
            return
        if keep:
            _LEFT_RUNNING.append(self._proc)  # on purpose: never waited for here
        else:
            await asyncio.to_thread(_wait_or_end, self._proc)


#: Meter processes a daemon left running for the bodies it left (``--keep-bodies``).
_LEFT_RUNNING: list[subprocess.Popen[bytes]] = []


def end_meter_left(run: Path) -> bool:
    """End the meter's process a daemon left running (SIGTERM: its requests finish
    first), when no daemon runs; True when there was one."""
    try:
        data = json.loads((meter_dir(run) / "pid").read_text())
        pid, started = int(data["pid"]), data["started"]
    except (OSError, ValueError, KeyError, TypeError):
        return False
    if started is None or start_time(pid) != started:
        return False
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    return True


def _wait_or_end(proc: subprocess.Popen[bytes]) -> None:
    try:
        proc.wait(timeout=6)
    except subprocess.TimeoutExpired:
        proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=2)


def _bind(port_file: Path, wanted: int | None = None) -> socket.socket:
    """A listening loopback socket on the kept port (another one when it is taken)."""
    if wanted is None:
        wanted = _kept_port(port_file)
    try:
        sock = socket.create_server((HOST, wanted), backlog=128)
    except OSError as exc:
        log.warning("meter: port %s is taken (%s); using another", wanted, exc)
        sock = socket.create_server((HOST, 0), backlog=128)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    port = int(sock.getsockname()[1])
    if port != wanted:
        port_file.write_text(f"{port}\n")
    return sock


def _kept_port(path: Path) -> int:
    try:
        port = int(path.read_text().strip())
    except (OSError, ValueError):
        return 0
    return port if 0 < port < 65536 else 0
