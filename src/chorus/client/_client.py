"""The client for the daemon's API: stdlib HTTP over the unix socket.

It imports nothing heavier than ``_socket`` (its HTTP is ``_http``) before a request is
sent, so that the everyday commands reach the socket fast: ``json`` loads while the
daemon answers, ``pathlib`` and ``urllib`` only for what needs them; starting a daemon
(which loads the config, pydantic and the daemon's own modules) happens only when
none answers.

Event streams are read without a read timeout of their own: the daemon writes
an SSE comment (``: ping``) every few seconds, and a stream that stays silent
longer than ``stream_idle_s`` is taken as a lost daemon.
"""

from __future__ import annotations

import os
import time

from chorus._errors import ChorusError, UserError
from chorus.client._http import Connection, ProtocolError, Response
from chorus.client._wire import dumps

#: ``typing`` is not imported at run time: it costs the fast path milliseconds.
TYPE_CHECKING = False

if TYPE_CHECKING:
    from collections.abc import Generator, Iterator
    from pathlib import Path
    from typing import Any

    from chorus.events import Event

#: How long an event stream may stay silent (no event, no ping) before the
#: client gives the daemon up. The daemon pings every ``[daemon] stream_ping_s``.
DEFAULT_STREAM_IDLE_S = 60.0
#: The longest wait for an event stream's headers (a busy daemon answers well within).
HEADERS_WAIT_S = 15.0
STREAM_IDLE_ENV = "CHORUS_STREAM_IDLE_S"


class DaemonError(ChorusError):
    """The daemon could not be started, reached or stopped."""


class DaemonLostError(DaemonError):
    """A stream from the daemon went silent (no event, no ping) for too long."""


class NotRunningError(DaemonError):
    """No daemon answers on the socket (and the caller asked not to start one)."""


def chorus_home() -> Path:
    """``$CHORUS_HOME`` (default ``~/.chorus``), without importing ``chorus.config``
    (which loads pydantic): the same rule as ``chorus.config.chorus_home``."""
    from pathlib import Path

    return Path(_home())


def _home() -> str:
    """:func:`chorus_home` as text (``pathlib`` costs a command its import)."""
    raw = os.environ.get("CHORUS_HOME")
    return os.path.expanduser(raw) if raw else os.path.join(os.path.expanduser("~"), ".chorus")


def socket_path() -> Path:
    from pathlib import Path

    return Path(_socket_file())


def _socket_file() -> str:
    """:func:`socket_path` as text."""
    return os.path.join(_home(), "run", "chorus.sock")


def _meanwhile() -> None:
    """Load ``json`` (its regexes take milliseconds to compile) once a request is on
    its way, while the daemon works on it: :func:`decode` and the readers use it."""
    import json  # noqa: F401


def stream_idle_s() -> float:
    raw = os.environ.get(STREAM_IDLE_ENV)
    try:
        return float(raw) if raw else DEFAULT_STREAM_IDLE_S
    except ValueError:
        return DEFAULT_STREAM_IDLE_S


def _connect(timeout: float | None) -> Connection:
    """A connected client, or :class:`NotRunningError` when nothing listens."""
    conn = Connection(_socket_file(), timeout)
    try:
        conn.connect()
    except OSError as exc:
        raise NotRunningError("the daemon is not running (start it with `chorus start`)") from exc
    return conn


def is_responding(timeout: float = 1.0) -> bool:
    """True if a daemon answers ``GET /status`` on the socket."""
    try:
        conn = _connect(timeout)
    except NotRunningError:
        return False
    try:
        conn.request("GET", "/status")
        return conn.getresponse().status == 200
    except (OSError, ProtocolError):
        return False
    finally:
        conn.close()


def decode(status: int, raw: bytes) -> Any:
    """JSON body of a success; a typed error otherwise (4xx: the user's, 5xx: ours)."""
    import json

    try:
        data = json.loads(raw) if raw else None
    except ValueError:
        data = {"error": raw.decode(errors="replace")}
    if status < 400:
        return data
    message = data.get("error") if isinstance(data, dict) else None
    message = message or raw.decode(errors="replace") or f"HTTP {status}"
    if status < 500:
        raise UserError(message)
    raise ChorusError(f"daemon error: {message}")


def _path(path: str, params: dict[str, str] | None) -> str:
    if not params:
        return path
    return path + "?" + "&".join(f"{_quote(k)}={_quote(v)}" for k, v in params.items())


def _job_path(job_id: str, tail: str = "") -> str:
    return f"/jobs/{_quote(job_id)}{tail}"


#: What a URL carries as it is (RFC 3986's unreserved characters).
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")


def _quote(text: str) -> str:
    """``text`` as a path segment or query value: as it is when only unreserved
    characters (a job id, a number), else quoted by ``urllib`` (loaded for that)."""
    if _UNRESERVED.issuperset(text):
        return text
    from urllib.parse import quote

    return quote(text, safe="")


class DaemonClient:
    """Synchronous client. With ``autostart``, a call that finds no daemon starts one."""

    def __init__(self, *, autostart: bool = True, timeout: float = 30.0) -> None:
        self.autostart = autostart
        self.timeout = timeout

    def _open(self, timeout: float | None) -> Connection:
        try:
            return _connect(timeout)
        except NotRunningError:
            if not self.autostart:
                raise
        start_daemon()
        return _connect(timeout)

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, bytes]:
        """One request; returns the status and the raw body."""
        return self.receive(self.send(method, path, body))

    def send(self, method: str, path: str, body: Any = None) -> Connection:
        """A request on its way; :meth:`receive` reads its answer (``json`` loads
        meanwhile, while the daemon works on it)."""
        conn = self._sent(method, path, body)
        _meanwhile()
        return conn

    def _sent(self, method: str, path: str, body: Any = None) -> Connection:
        conn = self._open(self.timeout)
        try:
            conn.request(method, path, None if body is None else dumps(body).encode())
        except OSError as exc:
            conn.close()
            raise _failed(exc) from exc
        return conn

    def receive(self, conn: Connection) -> tuple[int, bytes]:
        """The status and raw body answering the request sent on ``conn``, which it closes."""
        try:
            resp = conn.getresponse()
            return resp.status, resp.read()
        except (OSError, ProtocolError) as exc:
            raise _failed(exc) from exc
        finally:
            conn.close()

    def call(self, method: str, path: str, body: Any = None) -> Any:
        return decode(*self.request(method, path, body))

    def call_all(self, *requests: tuple[str, str]) -> list[Any]:
        """Several ``(method, path)`` requests sent at once, each on its own
        connection, then their answers read in order (one wait instead of several)."""
        conns: list[Connection] = []
        try:
            for method, path in requests:
                conns.append(self._sent(method, path))
        except BaseException:
            for conn in conns:
                conn.close()
            raise
        _meanwhile()
        return [decode(*self.receive(conn)) for conn in conns]

    # -- jobs ----------------------------------------------------------------------

    def submit(self, **request: Any) -> dict[str, Any]:
        return dict(self.call("POST", "/jobs", request))

    def jobs(self, state: str | None = None) -> list[dict[str, Any]]:
        return list(self.call("GET", _path("/jobs", {"state": state} if state else None)))

    def job(self, job_id: str) -> dict[str, Any]:
        return dict(self.call("GET", _job_path(job_id)))

    def interrupt(self, job_id: str) -> dict[str, Any]:
        return dict(self.call("POST", _job_path(job_id, "/interrupt")))

    def steer(self, job_id: str, text: str) -> dict[str, Any]:
        """Add ``text`` to the job's running turn (or queue it as a follow-up)."""
        status, raw = self.request("POST", _job_path(job_id, "/steer"), {"text": text})
        if status == 404 and not raw.startswith(b"{"):
            raise DaemonError(
                "this daemon cannot steer (it predates `chorus steer`): restart it with"
                " `chorus stop` then `chorus start`"
            )
        return dict(decode(status, raw))

    def event_lines(
        self, job_id: str, *, from_seq: int = 1, follow: bool = True
    ) -> Generator[str, None, None]:
        """The job's events as JSON text, one per item; with ``follow`` until it ends.

        No read timeout: a stream silent (no event, no ping) for ``stream_idle_s()``
        raises :class:`DaemonLostError`."""
        idle = stream_idle_s()
        params = {"from_seq": str(from_seq), "follow": "1" if follow else "0"}
        conn = self._open(self.timeout)
        try:
            conn.request("GET", _path(_job_path(job_id, "/events"), params))
            _meanwhile()
            wait = max(idle, HEADERS_WAIT_S)  # a stopped daemon sends no headers either
            conn.settimeout(wait)
            resp = _stream_response(conn, wait)
            if resp.status != 200:
                decode(resp.status, resp.read())
            conn.settimeout(idle)
            yield from _sse_data(resp, idle)
        finally:
            conn.close()

    def events(self, job_id: str, *, from_seq: int = 1, follow: bool = True) -> Iterator[Event]:
        """The job's events, parsed; with ``follow`` it blocks until the job ends."""
        from chorus.events import parse_event

        for line in self.event_lines(job_id, from_seq=from_seq, follow=follow):
            yield parse_event(line)

    # -- worktrees -----------------------------------------------------------

    def worktrees(self) -> list[dict[str, Any]]:
        return list(self.call("GET", "/worktrees"))

    def worktree(self, job_id: str, action: str = "", **body: Any) -> dict[str, Any]:
        """``action``: "" (describe), ``diff`` (GET); ``merge``, ``rm`` (POST with ``body``)."""
        path = f"/worktrees/{job_id}" + (f"/{action}" if action else "")
        if action in ("", "diff"):
            return dict(self.call("GET", path))
        return dict(self.call("POST", path, body))

    def prune_worktrees(self) -> dict[str, Any]:
        return dict(self.call("POST", "/worktrees/prune"))

    # -- sessions and the daemon --------------------------------------------------------

    def sessions(self) -> list[dict[str, Any]]:
        return list(self.call("GET", "/sessions"))

    def session(self, session_id: str) -> dict[str, Any]:
        return dict(self.call("GET", f"/sessions/{_quote(session_id)}"))

    def pause(self, session_id: str, *, drain_timeout: float = 600.0) -> None:
        """Stop new jobs of the session from starting, then wait until none runs."""
        self.call("POST", f"/sessions/{_quote(session_id)}/pause")
        deadline = time.monotonic() + drain_timeout
        while self.session(session_id).get("busy"):
            if time.monotonic() > deadline:
                self.resume(session_id)
                raise DaemonError(f"session {session_id} is still running a job")
            time.sleep(0.1)

    def resume(self, session_id: str) -> None:
        self.call("POST", f"/sessions/{_quote(session_id)}/resume")

    def status(self) -> dict[str, Any]:
        return dict(self.call("GET", "/status"))

    def shutdown(self) -> None:
        self.call("POST", "/shutdown")


def _failed(exc: BaseException) -> DaemonError:
    """Why a request got no answer, and what to do: a daemon that dropped it unread was
    going away (killed, or stopping) as it came."""
    if isinstance(exc, ConnectionResetError | BrokenPipeError):
        return DaemonError(
            "daemon request failed: the daemon dropped it unanswered (it was stopping or "
            "had died); run the command again, and see `chorus jobs` for a job it may "
            "have queued"
        )
    return DaemonError(f"daemon request failed: {exc}")


def _stream_response(conn: Connection, idle: float) -> Response:
    try:
        return conn.getresponse()
    except TimeoutError as exc:
        raise DaemonLostError(
            f"lost the daemon: no answer for {idle:g}s; the job may go on"
            " (see `chorus jobs`, `chorus watch JOB`)"
        ) from exc


def _sse_data(resp: Response, idle: float) -> Iterator[str]:
    """The ``data:`` payloads of an SSE response; comments (pings) only keep it alive."""
    while True:
        try:
            line = resp.readline()
        except TimeoutError as exc:
            raise DaemonLostError(
                f"lost the daemon: no event and no ping for {idle:g}s; the job may go on"
                " (see `chorus jobs`, `chorus watch JOB`)"
            ) from exc
        except (OSError, ProtocolError) as exc:
            raise DaemonLostError(f"lost the daemon mid-stream: {exc}") from exc
        if not line:
            return
        if line.startswith(b"data: "):
            yield line[6:].decode().rstrip("\r\n")


def start_daemon() -> None:
    """Start the daemon for the call on its way (it checks the config itself: a bad
    one raises ``ConfigError`` naming the key at fault, exit 2, instead of "the daemon
    exited"). No warm-up: that call, a job say, loads what it needs itself."""
    from chorus.client._lifecycle import spawn_daemon

    spawn_daemon(warm_up=False)
