"""The scripted fake model server: a real HTTP/1.1 server on 127.0.0.1.

Stdlib ``ThreadingHTTPServer`` (one thread per connection) so it runs the same
from sync tests and async tests, with no event loop of its own. Streams are
written with chunked transfer encoding: Claude keeps one connection alive for
all its calls, while Codex and Gemini get ``Connection: close`` after each
stream, as the servers the CLIs were recorded against did.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import socket
import threading
import time
import traceback
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Self

from chorus.testing import _anthropic, _gemini, _openai
from chorus.testing._recording import RecordedRequest, RequestKind
from chorus.testing._scenario import (
    ErrorKind,
    Failure,
    Reply,
    ScenarioLike,
    Text,
    as_scenario,
)
from chorus.testing._wire import Api, JsonReply, RenderContext, SseEvent

DEFAULT_LANE = "default"
EXHAUSTED_TEXT = "[chorus fake model: scenario exhausted]"
_LANE_PREFIX = "/lanes/"


@dataclass(slots=True)
class _Lane:
    """A scenario and its cursor; ``used`` counts hits on a repeating failure."""

    turns: tuple[Reply | Failure, ...]
    index: int = 0
    used: int = 0

    def take(self) -> tuple[int, Reply | Failure] | None:
        """The next turn to serve (advancing the cursor), or ``None`` when exhausted."""
        if self.index >= len(self.turns):
            return None
        position, turn = self.index, self.turns[self.index]
        if isinstance(turn, Failure):
            self.used += 1
            if turn.times is None or self.used < turn.times:
                return position, turn
        self.index, self.used = self.index + 1, 0
        return position, turn

    @property
    def remaining(self) -> int:
        return len(self.turns) - self.index


@dataclass(frozen=True, slots=True)
class _Stream:
    """A streamed 200 response: encoded events and the pause before paced ones."""

    events: list[SseEvent]
    delay: float
    content_type: str
    keep_alive: bool
    headers: tuple[tuple[str, str], ...] = ()


@dataclass(slots=True)
class _Decision:
    kind: RequestKind
    api: Api | None
    response: JsonReply | _Stream
    turn_index: int | None = None


class ModelServer:
    """Fake Anthropic / OpenAI Responses / Gemini endpoint driven by scenarios.

    Contract: main-agent requests (streaming calls) consume the lane's scenario
    in order, one turn each; side calls (Claude's model check, Gemini router and
    title calls, Codex compaction) are answered without consuming. Every request
    is recorded in arrival order. Use as ``with ModelServer(scenario) as server``
    (also ``async with``) or call :meth:`start` / :meth:`stop`.

    ``keep_alive`` forces persistent connections on (True) or off (False) for
    streams; ``None`` keeps them only for the Anthropic API.
    """

    def __init__(self, scenario: ScenarioLike = (), *, keep_alive: bool | None = None) -> None:
        self._lock = threading.Condition()
        self._lanes: dict[str, _Lane] = {DEFAULT_LANE: _Lane(as_scenario(scenario).turns)}
        self._requests: list[RecordedRequest] = []
        self._errors: list[str] = []
        self._keep_alive = keep_alive
        self._stopping = threading.Event()
        self._connections: set[socket.socket] = set()
        self._httpd: _HttpServer | None = None
        self._thread: threading.Thread | None = None
        self._rate_limit: int | None = None
        self._rate_left: dict[Api, int] = {}

    # -- lifecycle ---------------------------------------------------------

    def start(self) -> Self:
        """Bind 127.0.0.1 on an ephemeral port and serve in a background thread."""
        if self._httpd is not None:
            return self
        self._stopping.clear()
        httpd = _HttpServer(("127.0.0.1", 0), _Handler)
        httpd.model_server = self
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, cut open connections (ending slow streams) and join threads."""
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        self._stopping.set()
        httpd.shutdown()
        with self._lock:
            connections = list(self._connections)
        for conn in connections:
            # Unblocks handler threads idling on keep-alive reads so close can join them.
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    async def __aenter__(self) -> Self:
        return self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- addresses ---------------------------------------------------------

    @property
    def port(self) -> int:
        """The bound port (server must be started)."""
        if self._httpd is None:
            raise RuntimeError("ModelServer is not started")
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        """Base URL of the default lane, e.g. ``http://127.0.0.1:41234`` (no trailing slash)."""
        return f"http://127.0.0.1:{self.port}"

    def lane_url(self, lane: str = DEFAULT_LANE) -> str:
        """Base URL whose requests use ``lane``'s scenario (the default lane is :attr:`url`)."""
        if lane == DEFAULT_LANE:
            return self.url
        if "/" in lane or not lane:
            raise ValueError(f"bad lane name {lane!r}")
        return f"{self.url}{_LANE_PREFIX}{lane}"

    # -- scripting ---------------------------------------------------------

    def script(self, scenario: ScenarioLike, *, lane: str = DEFAULT_LANE) -> str:
        """Replace ``lane``'s scenario (cursor reset) and return that lane's base URL."""
        turns = as_scenario(scenario).turns
        with self._lock:
            self._lanes[lane] = _Lane(turns)
        return self.lane_url(lane) if self._httpd is not None else ""

    def reset(self) -> None:
        """Forget every lane's scenario, the recorded requests and the stated rate
        limit, as a fresh server would (the port and its connections stay): one server
        shared by several tests starts each test clean. Errors are kept, so a caller
        that checks :attr:`errors` at the end still sees what went wrong earlier."""
        with self._lock:
            self._lanes = {DEFAULT_LANE: _Lane(())}
            self._requests = []
            self._rate_limit, self._rate_left = None, {}

    def state_rate_limit(self, requests: int | None) -> None:
        """Send rate-limit headers with every streamed answer, as the providers do:
        ``requests`` a minute, one fewer left after each (Anthropic's
        ``anthropic-ratelimit-requests-*``, OpenAI's ``x-ratelimit-*-requests``; the
        Gemini API sends none). None: send none (the default)."""
        with self._lock:
            self._rate_limit, self._rate_left = requests, {}

    def rate_limit_left(self, api: Api) -> int | None:
        """The requests left that the last answer on ``api`` stated (None: none stated)."""
        with self._lock:
            return self._rate_left.get(api)

    def _rate_headers(self, api: Api) -> tuple[tuple[str, str], ...]:
        with self._lock:
            limit = self._rate_limit
            if limit is None or api == "gemini":
                return ()
            left = self._rate_left[api] = max(0, self._rate_left.get(api, limit) - 1)
        if api == "anthropic":
            reset = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 60))
            prefix = "anthropic-ratelimit-requests-"
            return (
                (prefix + "limit", str(limit)),
                (prefix + "remaining", str(left)),
                (prefix + "reset", reset),
            )
        return (
            ("x-ratelimit-limit-requests", str(limit)),
            ("x-ratelimit-remaining-requests", str(left)),
            ("x-ratelimit-reset-requests", "60s"),
        )

    def remaining_turns(self, lane: str = DEFAULT_LANE) -> int:
        """Turns of ``lane`` not yet served (a repeating failure counts until passed)."""
        with self._lock:
            found = self._lanes.get(lane)
            return found.remaining if found else 0

    # -- recording ---------------------------------------------------------

    @property
    def requests(self) -> list[RecordedRequest]:
        """A snapshot of every recorded request, in arrival order."""
        with self._lock:
            return list(self._requests)

    def requests_of(
        self, kind: RequestKind | None = None, *, lane: str | None = None
    ) -> list[RecordedRequest]:
        """Recorded requests filtered by ``kind`` and ``lane`` (``None`` = any)."""
        return [
            r
            for r in self.requests
            if (kind is None or r.kind == kind) and (lane is None or r.lane == lane)
        ]

    def turn_requests(self, lane: str | None = None) -> list[RecordedRequest]:
        """Main-agent requests that consumed a scenario turn, in order."""
        return self.requests_of("turn", lane=lane)

    @property
    def errors(self) -> list[str]:
        """Tracebacks of exceptions raised while handling requests (should stay empty)."""
        with self._lock:
            return list(self._errors)

    def wait_for(
        self, predicate: Callable[[list[RecordedRequest]], bool], timeout: float = 10.0
    ) -> list[RecordedRequest]:
        """Block until ``predicate(requests)`` holds; raise ``TimeoutError`` after ``timeout``."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while not predicate(list(self._requests)):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError("condition on recorded requests not met")
                self._lock.wait(left)
            return list(self._requests)

    # -- request handling (called from handler threads) -------------------

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self._requests.append(request)
            self._lock.notify_all()

    def _finish(self, record: RecordedRequest, *, disconnected: bool) -> None:
        """Mark a response as fully written (or cut off) and wake :meth:`wait_for` callers."""
        with self._lock:
            record.disconnected = disconnected
            record.finished = True
            self._lock.notify_all()

    def _next_turn(self, lane: str) -> tuple[int, Reply | Failure] | None:
        with self._lock:
            found = self._lanes.get(lane)
            return found.take() if found else None

    def _track(self, conn: socket.socket, *, add: bool) -> None:
        with self._lock:
            if add:
                self._connections.add(conn)
            else:
                self._connections.discard(conn)

    def _note_error(self, text: str) -> None:
        with self._lock:
            self._errors.append(text)

    def _decide(self, api: Api, path: str, body: Any, lane: str) -> _Decision:
        """Classify the request and build its response (consuming a turn if it is one)."""
        if api == "anthropic":
            if _anthropic.is_side_stream(body):
                reply = Reply(blocks=(Text(text=_anthropic.SIDE_STREAM_TEXT),))
                stream = self._stream(api, reply, _anthropic.model_of(body), body)
                return _Decision("side", api, stream)
            if not _anthropic.is_turn_request(body):
                return _Decision("side", api, _anthropic.side_reply(body))
            return self._turn(api, lane, _anthropic.model_of(body), body)
        if api == "openai":
            side = _openai.side_reply(body)
            if side is not None:
                return _Decision("side", api, self._stream(api, side, _openai.model_of(body), body))
            return self._turn(api, lane, _openai.model_of(body), body)
        model, operation = _gemini.parse_path(path) or (_gemini.DEFAULT_MODEL, "")
        if not _gemini.is_turn_request(operation):
            return _Decision("side", api, _gemini.side_reply(operation, model, body))
        return self._turn(api, lane, model, body)

    def _turn(self, api: Api, lane: str, model: str, body: Any) -> _Decision:
        """Serve the lane's next turn: an error reply, a stream, or the exhausted text."""
        taken = self._next_turn(lane)
        if taken is None:
            reply = Reply(blocks=(Text(text=EXHAUSTED_TEXT),))
            return _Decision("exhausted", api, self._stream(api, reply, model, body))
        index, turn = taken
        if isinstance(turn, Failure):
            return _Decision("turn", api, _ERROR_REPLY[api](turn.error), index)
        return _Decision("turn", api, self._stream(api, turn, model, body), index)

    def _stream(self, api: Api, reply: Reply, model: str, body: Any) -> _Stream:
        """Render ``reply`` for ``api``, resolving relative paths against the CLI's cwd."""
        ctx = RenderContext(model=model, cwd=_WORKING_DIR[api](body))
        events = _RENDER[api](reply, ctx)
        keep_alive = self._keep_alive if self._keep_alive is not None else api == "anthropic"
        limits = self._rate_headers(api)
        if api == "anthropic":
            # Claude echoes request-id as request_id on its stdout lines.
            headers = (("request-id", ctx.new_id("req")), *limits)
            return _Stream(
                events, reply.delay, "text/event-stream; charset=utf-8", keep_alive, headers
            )
        return _Stream(events, reply.delay, "text/event-stream", keep_alive, limits)


_RENDER: dict[Api, Callable[[Reply, RenderContext], list[SseEvent]]] = {
    "anthropic": _anthropic.render,
    "openai": _openai.render,
    "gemini": _gemini.render,
}
_ERROR_REPLY: dict[Api, Callable[[ErrorKind], JsonReply]] = {
    "anthropic": _anthropic.error_reply,
    "openai": _openai.error_reply,
    "gemini": _gemini.error_reply,
}
_WORKING_DIR: dict[Api, Callable[[Any], str | None]] = {
    "anthropic": _anthropic.working_dir,
    "openai": _openai.working_dir,
    "gemini": _gemini.working_dir,
}


def api_for_path(path: str) -> Api | None:
    """Which API a POST path belongs to (query string ignored)."""
    bare = path.split("?", 1)[0]
    if bare.endswith("/v1/messages"):
        return "anthropic"
    if bare.endswith("/responses"):
        return "openai"
    if _gemini.parse_path(bare) is not None:
        return "gemini"
    return None


def split_lane(path: str) -> tuple[str, str]:
    """``(lane, path)`` with a leading ``/lanes/<name>`` removed."""
    if path.startswith(_LANE_PREFIX):
        rest = path[len(_LANE_PREFIX) :]
        lane, _, tail = rest.partition("/")
        return lane, "/" + tail
    return DEFAULT_LANE, path


class _HttpServer(ThreadingHTTPServer):
    daemon_threads = True
    # Joined explicitly via connection shutdown in ModelServer.stop.
    block_on_close = True
    model_server: ModelServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Keep handler exceptions for ``ModelServer.errors`` instead of printing them."""
        self.model_server._note_error(traceback.format_exc())


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _HttpServer
    # Idle keep-alive connections are dropped after this many seconds.
    timeout = 120

    def setup(self) -> None:
        super().setup()
        # Each SSE event leaves when written, as a provider's do (no Nagle wait for
        # the client's delayed ACK of the one before).
        with contextlib.suppress(OSError):
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server.model_server._track(self.connection, add=True)

    def finish(self) -> None:
        self.server.model_server._track(self.connection, add=False)
        with contextlib.suppress(OSError):
            super().finish()

    def log_message(self, format: str, *args: Any) -> None:
        """Silence per-request logging; everything is in ``ModelServer.requests``."""

    def do_HEAD(self) -> None:
        """200 for reachability probes (Claude's ``HEAD /`` and ``HEAD /api/hello``)."""
        self._record_plain("HEAD", 200)
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self) -> None:
        """No GET endpoint is needed by the pinned CLIs: 404 JSON."""
        self._record_plain("GET", 404)
        self._send_json(JsonReply(404, {"error": {"message": "not found", "type": "not_found"}}))

    def do_POST(self) -> None:
        """Route a model call, record it, and answer with JSON or a stream."""
        model_server = self.server.model_server
        lane, path = split_lane(self.path)
        raw = self._read_body()
        body = _parse_json(raw)
        api = api_for_path(path)
        if api is None:
            self._record_plain("POST", 404, body=body)
            self._send_json(JsonReply(404, {"error": {"message": f"no route for {path}"}}))
            return
        decision = model_server._decide(api, path, body, lane)
        response = decision.response
        completed = False
        record = RecordedRequest(
            method="POST",
            path=path,
            headers={k.lower(): v for k, v in self.headers.items()},
            body=body,
            timestamp=time.time(),
            lane=lane,
            api=api,
            kind=decision.kind,
            turn_index=decision.turn_index,
            status=response.status if isinstance(response, JsonReply) else 200,
        )
        model_server._record(record)
        try:
            if isinstance(response, JsonReply):
                self._send_json(response)
                completed = True
            else:
                completed = self._send_stream(response)
        finally:
            model_server._finish(record, disconnected=not completed)

    def _record_plain(self, method: str, status: int, body: Any = None) -> None:
        lane, path = split_lane(self.path)
        self.server.model_server._record(
            RecordedRequest(
                method=method,
                path=path,
                headers={k.lower(): v for k, v in self.headers.items()},
                body=body,
                timestamp=time.time(),
                lane=lane,
                api=None,
                kind="other",
                status=status,
                finished=True,
            )
        )

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            raw = self._read_chunked()
        else:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        encoding = self.headers.get("Content-Encoding", "").lower()
        if encoding == "gzip":
            return gzip.decompress(raw)
        if encoding == "deflate":
            return zlib.decompress(raw)
        return raw

    def _read_chunked(self) -> bytes:
        parts: list[bytes] = []
        while True:
            size = int(self.rfile.readline().split(b";", 1)[0].strip() or b"0", 16)
            if size == 0:
                self.rfile.readline()  # the CRLF after the last-chunk (no trailers sent)
                return b"".join(parts)
            parts.append(self.rfile.read(size))
            self.rfile.readline()

    def _send_json(self, reply: JsonReply) -> None:
        data = reply.encoded()
        self.send_response(reply.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in reply.headers:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _send_stream(self, stream: _Stream) -> bool:
        """Write a chunked SSE response; False if the client disconnected or we stopped."""
        stopping = self.server.model_server._stopping
        try:
            self.send_response(200)
            self.send_header("Content-Type", stream.content_type)
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Transfer-Encoding", "chunked")
            for name, value in stream.headers:
                self.send_header(name, value)
            if not stream.keep_alive:
                self.send_header("Connection", "close")
                self.close_connection = True
            self.end_headers()
            self.wfile.flush()
            for event in stream.events:
                if event.paced and stream.delay > 0 and stopping.wait(stream.delay):
                    self.close_connection = True
                    return False
                self.wfile.write(b"%x\r\n%s\r\n" % (len(event.data), event.data))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
            return True
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
            self.close_connection = True
            return False


def _parse_json(raw: bytes) -> Any:
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return None
