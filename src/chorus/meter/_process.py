"""The meter's own process: ``python -m chorus.meter <run dir> <fd> <orphan s>``.

The daemon binds the meter's loopback port and starts this process with the socket
(fd ``<fd>``) in its own session, so it outlives a daemon killed mid-request: a
body's model call in flight finishes, and its record waits in the spool
(``<run dir>/meter/records.jsonl``) for the next daemon, which re-adopts the process
(``pid`` names it) instead of starting another.

It serves ``/s/<session token>/meter/<api>/<ref>/...`` (tokens made with the
channel key, ``<run dir>/channel.key``: a body reaches only its own session's path)
and talks to the daemon over ``<run dir>/meter/link.sock`` (0600, in a 0700 folder),
one JSON object a line:

- from the daemon: ``hello``/``secrets`` (the values to hide; whether a budget is
  set, else no ``admit`` is asked), ``verdict`` (a budget's answer), ``budget``
  (pushed: the sessions' verdicts, and the spool offset of the last record it
  took), ``exit``;
- to the daemon: ``ready`` (the hello was taken: this daemon is asked from now on),
  ``admit`` (may this session's request go?) and ``record`` (a line just appended
  to the spool, with its end offset).

Budgets are answered from the verdicts the daemon pushes (``_Budget``): a request
goes at once when its session's verdict is to go and the daemon has taken every
record this process sent it (else it waits for the daemon's word on them, so a
budget is overshot by the requests in flight at most); a session with no verdict
yet, or refused, is asked about (a refusal is the daemon's to make: it ends the
job). A daemon that does not push is asked before each request. Model requests
wait for the first ``hello`` (up to :data:`ARM_TIMEOUT`), so none leaves before the
secrets are known. Without a daemon a budget's last verdict for the session holds.
It exits on ``exit``, on SIGTERM, when its run folder is gone, or after
``<orphan s>`` with no daemon linked and no request in flight.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import hmac
import itertools
import json
import logging
import os
import re
import socket
import sys
import time
from collections.abc import Awaitable, Mapping
from pathlib import Path
from typing import Any

import uvicorn

from chorus._procs import start_time as process_start
from chorus.events import Metered
from chorus.meter._proxy import MeterApp, Receive, Scope, Send
from chorus.meter._quota import QuotaBook, Window
from chorus.meter._replies import api_error
from chorus.meter._secrets import SecretBook
from chorus.meter._spool import Spool
from chorus.meter._unix import socket_path
from chorus.meter._usage import APIS, Api

log = logging.getLogger("chorus.meter")

#: A request waits this long for the daemon's first word (the secrets) at most.
ARM_TIMEOUT = 30.0
#: The daemon answers an ``admit`` within this, or the last verdict holds.
ADMIT_TIMEOUT = 10.0
_ROUTE = re.compile(r"/s/([^/]+)/meter(/.*)?", re.DOTALL)
_CHANNEL_ID = re.compile(r"[A-Za-z0-9_-]{1,128}")


def meter_dir(run: Path) -> Path:
    return run / "meter"


def start_time(pid: int) -> int | None:
    """When process ``pid`` started (clock ticks since boot), None when it is gone."""
    return process_start(pid, zombies=False)


@functools.lru_cache(maxsize=1024)  # a body sends the same token with every request
def token_channel(key: bytes, token: str) -> str | None:
    """The session a token was made for (as ``chorus.bodies.token_channel``, which
    this light process does not import)."""
    channel_id, dot, mac = token.rpartition(".")
    if not dot or not _CHANNEL_ID.fullmatch(channel_id):
        return None
    digest = hmac.new(key, b"chorus-channel\0" + channel_id.encode(), hashlib.sha256)
    return channel_id if hmac.compare_digest(digest.hexdigest()[:32], mac) else None


class _Link:
    """The daemon's connection, and the questions asked on it."""

    def __init__(self) -> None:
        self.writer: asyncio.StreamWriter | None = None
        self.pending: dict[int, asyncio.Future[str | None]] = {}
        self.ids = itertools.count(1)
        self.budget = _Budget()

    def send(self, message: Mapping[str, Any]) -> bool:
        return self.write((json.dumps(message, separators=(",", ":")) + "\n").encode())

    def write(self, line: bytes) -> bool:
        if self.writer is None or self.writer.is_closing():
            return False
        self.writer.write(line)
        return True

    def drop(self, writer: asyncio.StreamWriter) -> None:
        if self.writer is writer:
            self.writer = None
            for future in self.pending.values():
                if not future.done():
                    future.cancel()
            self.pending.clear()
            self.budget.unlinked()


class _Budget:
    """The budget as the daemon pushes it: each session's verdict, and how far the
    daemon has taken the records this process sent it (spool offsets)."""

    def __init__(self) -> None:
        #: Whether the daemon pushes (else it is asked before each request).
        self.pushed = False
        #: The end of the last metered record sent on the link, and the daemon's word
        #: on how far it took them.
        self.sent = self.taken = 0
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []

    def current(self) -> bool:
        """Whether the daemon's verdicts count every record sent."""
        return self.pushed and self.taken >= self.sent

    async def caught_up(self) -> None:
        """Wait (up to :data:`ADMIT_TIMEOUT`) for the daemon's word on every record
        sent so far."""
        future = asyncio.get_running_loop().create_future()
        waiter = (self.sent, future)
        self._waiters.append(waiter)
        try:
            await asyncio.wait_for(future, ADMIT_TIMEOUT)
        except TimeoutError:
            log.warning("meter: the daemon took no record for %g s", ADMIT_TIMEOUT)
        finally:
            with contextlib.suppress(ValueError):
                self._waiters.remove(waiter)

    def took(self, upto: int) -> None:
        """The daemon took the records up to spool offset ``upto``."""
        self.taken = max(self.taken, upto)
        for end, future in self._waiters:
            if end <= self.taken and not future.done():
                future.set_result(None)

    def unlinked(self) -> None:
        """No daemon (its last verdicts hold): nothing to wait for."""
        self.pushed = False
        self.sent = self.taken = 0
        for _, future in self._waiters:
            if not future.done():
                future.set_result(None)


class MeterProcess:
    """The sink, the link and the HTTP front of the meter's process."""

    def __init__(self, run: Path, orphan_s: float) -> None:
        self.run, self.dir, self.orphan_s = run, meter_dir(run), orphan_s
        self.spool = Spool(self.dir / "records.jsonl")
        self.link = _Link()
        self.verdicts: dict[str, str | None] = {}
        self.armed = asyncio.Event()
        self.ask = True  # whether the daemon holds budgets to ask about
        self.busy = 0
        self.idle_since = time.monotonic()
        quotas = QuotaBook(listeners=[self._stated])
        self.app = MeterApp((run / "channel.key").read_bytes(), self, quotas=quotas)
        self.server: uvicorn.Server | None = None

    # -- the sink -----------------------------------------------------------------------

    def admit(self, channel: str, api: str) -> str | Awaitable[str | None] | None:
        """At once when no budget is set, no daemon is linked, or the daemon's pushed
        verdicts let the session go; else (an awaitable) after the daemon's word."""
        if not self.ask or self.link.writer is None:
            return self.verdicts.get(channel)
        if self.link.budget.current() and self.verdicts.get(channel, _UNKNOWN) is None:
            return None
        return self._admit(channel, api)

    async def _admit(self, channel: str, api: str) -> str | None:
        budget = self.link.budget
        if budget.pushed and not budget.current():
            await budget.caught_up()  # the daemon's verdicts then count this one's records
            if self.verdicts.get(channel, _UNKNOWN) is None:
                return None
        return await self._ask(channel, api)

    async def _ask(self, channel: str, api: str) -> str | None:
        """The daemon's verdict on the session (a refusal is the daemon's to make: it
        ends the job; with no answer within :data:`ADMIT_TIMEOUT`, the last holds)."""
        future: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
        ask = next(self.link.ids)
        if not self.link.send({"op": "admit", "id": ask, "channel": channel, "api": api}):
            return self.verdicts.get(channel)
        self.link.pending[ask] = future
        try:
            return await asyncio.wait_for(future, ADMIT_TIMEOUT)
        except (TimeoutError, asyncio.CancelledError):
            self.link.pending.pop(ask, None)
            return self.verdicts.get(channel)

    def record(self, channel: str, event: Metered) -> None:
        self.record_fields(channel, event.model_dump(mode="json"))

    def record_fields(self, channel: str, fields: dict[str, Any]) -> None:
        """A request's :class:`Metered` event, as its JSON fields (no model made)."""
        self._keep({"kind": "metered", "channel": channel, "event": fields})

    def _stated(self, api: str, upstream: str, windows: Mapping[str, Window], at: float) -> None:
        found = {k: w.to_json() for k, w in windows.items()}
        self._keep({"kind": "quota", "api": api, "upstream": upstream, "windows": found, "at": at})

    def _keep(self, record: dict[str, Any]) -> None:
        line = self.spool.line(record)
        end = self.spool.append_line(line)
        # the spool's line is the message's record, not encoded twice
        sent = self.link.write(b'{"op":"record","end":%d,"record":%s}\n' % (end, line[:-1]))
        if sent and self.ask and record["kind"] == "metered":
            self.link.budget.sent = end  # the next request waits for the daemon's word

    # -- the daemon's link --------------------------------------------------------------

    async def linked(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """A daemon connected: the newest one is the daemon."""
        if self.link.writer is not None:
            self.link.writer.close()
            self.link.drop(self.link.writer)
        self.link.writer = writer
        try:
            while line := await reader.readline():
                self._told(line)
        except (OSError, ValueError) as exc:
            log.warning("meter: the daemon's link broke: %s", type(exc).__name__)
        finally:
            self.link.drop(writer)
            self.idle_since = time.monotonic()
            writer.close()

    def _told(self, line: bytes) -> None:
        try:
            message = json.loads(line)
        except ValueError:
            return
        op = message.get("op") if isinstance(message, dict) else None
        if op in ("hello", "secrets"):
            self._hello(op, message)
        elif op == "budget":
            self._budget(message)
        elif op == "verdict":
            self._verdict(message)
        elif op == "exit" and self.server is not None:
            self.server.should_exit = True

    def _hello(self, op: str, message: dict[str, Any]) -> None:
        self.app.secrets = SecretBook(dict(message.get("secrets") or {}))
        if op == "hello":
            self.link.budget.pushed = message.get("push") is True
        if not self.link.budget.pushed:  # (a pushing daemon's are its pushed ones)
            self.verdicts.update(_verdicts(message.get("verdicts")))
        self.ask = message.get("ask") is not False
        if not self.ask:
            self.verdicts.clear()
            self.link.budget.took(self.link.budget.sent)  # nothing to wait for
        self.armed.set()
        if op == "hello":
            self._budget(message)
            self.link.send({"op": "ready"})

    def _budget(self, message: dict[str, Any]) -> None:
        """The daemon's pushed verdicts (all the sessions it keeps current: the others
        are asked about) and how far it took the records."""
        if isinstance(message.get("sessions"), dict):
            self.verdicts = _verdicts(message["sessions"])
        upto = message.get("upto")
        if isinstance(upto, int):
            self.link.budget.took(upto)

    def _verdict(self, message: dict[str, Any]) -> None:
        why = message.get("why")
        why = why if isinstance(why, str) else None
        self.verdicts[str(message.get("channel"))] = why
        future = self.link.pending.pop(int(message.get("id") or 0), None)
        if future is not None and not future.done():
            future.set_result(why)

    # -- HTTP ---------------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        match = _ROUTE.fullmatch(str(scope.get("path", "")))
        channel = token_channel(self.app.key, match.group(1)) if match else None
        if match is None or channel is None:
            await _bare(send, 404, b"not found")
            return
        self.busy += 1
        try:
            await self._metered(channel, match.group(2) or "", scope, receive, send)
        finally:
            self.busy -= 1
            self.idle_since = time.monotonic()

    async def _metered(
        self, channel: str, rest: str, scope: Scope, receive: Receive, send: Send
    ) -> None:
        try:
            if not self.armed.is_set():
                await asyncio.wait_for(self.armed.wait(), ARM_TIMEOUT)
        except TimeoutError:
            reply = api_error(_api_of(rest), 502, _UNARMED, "bad_gateway")
            await _bare(send, 502, reply.body, b"application/json")
            return
        await self.app(channel, rest, scope, receive, send)

    # -- life ---------------------------------------------------------------------------

    async def serve(self, sock: socket.socket) -> None:
        link_path = self.dir / "link.sock"
        link_path.unlink(missing_ok=True)
        with socket_path(link_path) as where:
            link = await asyncio.start_unix_server(self.linked, path=where)
        os.chmod(link_path, 0o600)
        self._write_pid(sock)
        self.server = uvicorn.Server(_config(self))
        watch = asyncio.create_task(self._watch(), name="meter-watch")
        try:
            await self.server.serve(sockets=[sock])
        finally:
            watch.cancel()
            link.close()
            await self.app.close()
            self._forget(link_path)

    def _write_pid(self, sock: socket.socket) -> None:
        pid = os.getpid()
        port = int(sock.getsockname()[1])
        data = {"pid": pid, "started": start_time(pid), "port": port}
        tmp = self.dir / f".pid.{pid}"
        tmp.write_text(json.dumps(data))
        tmp.replace(self.dir / "pid")

    def _forget(self, link_path: Path) -> None:
        with contextlib.suppress(OSError, ValueError):
            if json.loads((self.dir / "pid").read_text()).get("pid") == os.getpid():
                (self.dir / "pid").unlink()
                link_path.unlink(missing_ok=True)
        self.spool.close()

    async def _watch(self) -> None:
        """Leave when the run folder is gone, or orphaned and idle for too long."""
        while True:
            await asyncio.sleep(2.0)
            alone = self.link.writer is None and self.busy == 0
            if not self.dir.is_dir() or (
                alone and time.monotonic() - self.idle_since > self.orphan_s
            ):
                assert self.server is not None
                self.server.should_exit = True
                return


#: No verdict for a session yet (a verdict of None lets it go).
_UNKNOWN = "unknown"


def _verdicts(value: Any) -> dict[str, str | None]:
    if not isinstance(value, dict):
        return {}
    return {str(k): v if isinstance(v, str) else None for k, v in value.items()}


def _api_of(rest: str) -> Api:
    name = rest.lstrip("/").split("/", 1)[0]
    return next((api for api in APIS if api == name), "gemini")


_UNARMED = "Chorus meter: the daemon has not started this meter yet; try again"


async def _bare(send: Send, status: int, body: bytes, kind: bytes = b"text/plain") -> None:
    head = [(b"content-type", kind), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": head})
    await send({"type": "http.response.body", "body": body})


def _config(app: MeterProcess) -> uvicorn.Config:
    # httptools (C) parses each model request: a quarter less CPU per request than
    # h11 (pure Python) in bench/bench_meter.py, on every request a body makes.
    return uvicorn.Config(
        app,
        http="httptools",
        lifespan="off",
        ws="none",
        log_config=None,
        log_level="warning",
        access_log=False,  # not logged (its arguments were made for every request)
        proxy_headers=False,
        server_header=False,
        date_header=False,
        timeout_graceful_shutdown=5,
        # longer than the CLIs' own idle limits (Node's 4 s, reqwest's 90 s): the CLI
        # closes an idle connection first, never the meter while a request is sent
        # on it, and a CLI's next request does not connect again
        timeout_keep_alive=120,
    )


def main(argv: list[str]) -> int:
    """``<run dir> <fd> [<orphan s>]``: serve until told to stop."""
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s meter %(message)s")
    run, fd = Path(argv[0]), int(argv[1])
    orphan_s = float(argv[2]) if len(argv) > 2 else 900.0
    sock = socket.socket(fileno=fd)
    sock.setblocking(False)

    async def go() -> None:
        await MeterProcess(run, orphan_s).serve(sock)

    asyncio.run(go())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
