"""The meter as the daemon serves it: a route of the sessions' channel listener on
loopback, forwarding to the scripted model server. Chunks pass as they come, the
provider's 429s and 5xx pass exactly (status, headers, body; never retried), a slow
upstream is waited for, one that breaks off breaks the client's stream, one that is
down is a 502 in the API's own shape, a budget refusal never reaches the upstream, a
client that goes away closes the upstream request, and each request's usage reaches
the sink."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from chorus.bodies import Channel, channel_key, session_token
from chorus.events import Metered
from chorus.mcpserver import channel_running
from chorus.meter import MeterApp, meter_url
from chorus.testing import ErrorKind, ModelServer, error, slow_text, text
from chorus.testing._recording import RecordedRequest

MESSAGES = {
    "model": "claude-sonnet-4-5",
    "max_tokens": 64,
    "stream": True,
    "messages": [{"role": "user", "content": "hi"}],
}
RESPONSES = {
    "model": "gpt-5.5",
    "stream": True,
    "input": [{"role": "user", "content": [{"type": "input_text", "text": "hi"}]}],
}
GEMINI = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
GEMINI_PATH = "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"


@dataclass
class Sink:
    refuse: str | None = None
    asked: list[tuple[str, str]] = field(default_factory=list)
    events: list[tuple[str, Metered]] = field(default_factory=list)

    def admit(self, channel: str, api: str) -> str | None:
        self.asked.append((channel, api))
        return self.refuse

    def record(self, channel: str, event: Metered) -> None:
        self.events.append((channel, event))


@dataclass
class Served:
    channel: Channel
    sink: Sink
    meter: MeterApp
    server: ModelServer

    def url(self, api: str, session: str = "s1", upstream: str | None = None) -> str:
        return meter_url(self.channel, session, api, upstream or self.server.url)  # type: ignore[arg-type]


@pytest.fixture
async def served(chorus_home: Path) -> AsyncIterator[Served]:
    sink = Sink()
    meter = MeterApp(channel_key(), sink)
    with ModelServer() as server:
        async with channel_running(None, None, {"meter": meter}) as channel:
            yield Served(channel, sink, meter, server)
        await meter.close()
        assert server.errors == []


async def test_a_stream_passes_through_chunk_by_chunk_and_its_usage_is_recorded(
    served: Served,
) -> None:
    served.server.script([slow_text("one two three four", chunks=4, delay=0.3)])
    arrivals: list[float] = []
    raw = b""
    async with httpx.AsyncClient() as client:
        url = served.url("anthropic") + "/v1/messages?beta=true"
        async with client.stream("POST", url, json=MESSAGES, headers={"x-api-key": "k1"}) as resp:
            assert resp.status_code == 200
            async for chunk in resp.aiter_raw():
                arrivals.append(time.monotonic())
                raw += chunk
    assert arrivals[-1] - arrivals[0] > 0.6  # the paced deltas came one by one
    assert b"message_stop" in raw
    sent = served.server.turn_requests()[0]
    assert sent.headers["x-api-key"] == "k1"
    assert sent.path == "/v1/messages?beta=true"
    assert sent.body == MESSAGES
    [(channel, event)] = served.sink.events
    assert channel == "s1"
    assert event.api == "anthropic"
    assert event.complete
    assert event.usage.input_tokens == 100
    assert event.usage.output_tokens == 20
    assert event.model == "claude-sonnet-4-5"
    assert event.cost_usd == pytest.approx((100 * 3 + 20 * 15) / 1e6)
    assert served.sink.asked == [("s1", "anthropic")]


@pytest.mark.parametrize(
    ("api", "path", "body"),
    [("openai", "/v1/responses", RESPONSES), ("gemini", GEMINI_PATH, GEMINI)],
)
async def test_openai_and_gemini_usage_is_read_from_their_streams(
    served: Served, api: str, path: str, body: dict[str, object]
) -> None:
    served.server.script([text("hello")])
    async with httpx.AsyncClient() as client:
        resp = await client.post(served.url(api) + path, json=body)
    assert resp.status_code == 200
    [(_, event)] = served.sink.events
    assert (event.usage.input_tokens, event.usage.output_tokens) == (100, 20)
    assert event.complete
    assert event.cost_usd is not None
    assert event.cost_usd > 0


async def test_the_providers_errors_reach_the_cli_verbatim(served: Served) -> None:
    served.server.script([error("rate_limit")])
    async with httpx.AsyncClient() as client:
        resp = await client.post(served.url("openai") + "/v1/responses", json=RESPONSES)
    assert resp.status_code == 429
    assert resp.headers["retry-after"] == "1"
    assert resp.headers["x-ratelimit-reset-requests"] == "1s"
    assert resp.json()["error"]["code"] == "rate_limit_exceeded"
    assert len(served.server.turn_requests()) == 1  # not retried
    assert served.sink.events[0][1].status == 429


async def test_gemini_quota_errors_are_kept_as_its_quota(served: Served) -> None:
    served.server.script([error("quota")])
    async with httpx.AsyncClient() as client:
        resp = await client.post(served.url("gemini") + GEMINI_PATH, json=GEMINI)
    assert resp.status_code == 429
    assert resp.json()["error"]["status"] == "RESOURCE_EXHAUSTED"
    quota = served.meter.quotas.snapshot()["gemini"]["windows"]
    assert quota["GenerateRequestsPerDayPerProjectPerModel-FreeTier"]["remaining"] == 0
    assert quota["GenerateRequestsPerDayPerProjectPerModel-FreeTier"]["limit"] == 250


async def test_rate_limit_headers_become_the_quota(served: Served) -> None:
    served.server.state_rate_limit(50)
    served.server.script([text("a"), text("b")])
    async with httpx.AsyncClient() as client:
        for _ in range(2):
            await client.post(served.url("openai") + "/v1/responses", json=RESPONSES)
    windows = served.meter.quotas.snapshot()["openai"]["windows"]
    assert windows["requests"]["limit"] == 50
    assert windows["requests"]["remaining"] == 48
    assert windows["requests"]["reset_at"] == pytest.approx(time.time() + 60, abs=5)


async def test_an_upstream_that_is_down_is_a_502_in_the_apis_shape(served: Served) -> None:
    down = "http://127.0.0.1:9"  # discard port: nothing listens
    async with httpx.AsyncClient() as client:
        resp = await client.post(
            served.url("anthropic", upstream=down) + "/v1/messages", json=MESSAGES
        )
    assert resp.status_code == 502
    body = resp.json()
    assert body["type"] == "error"
    assert body["error"]["type"] == "api_error"
    assert "could not be reached" in body["error"]["message"]


@pytest.mark.parametrize(
    ("api", "path", "body", "where"),
    [
        ("anthropic", "/v1/messages", MESSAGES, ("error", "message")),
        ("openai", "/v1/responses", RESPONSES, ("error", "message")),
        ("gemini", GEMINI_PATH, GEMINI, ("error", "message")),
    ],
)
async def test_a_budget_refusal_is_the_apis_own_400_and_never_reaches_upstream(
    served: Served, api: str, path: str, body: dict[str, object], where: tuple[str, str]
) -> None:
    served.sink.refuse = "this job spent $0.01 of its $0.01 (per_job_usd)"
    served.server.script([text("never")])
    async with httpx.AsyncClient() as client:
        resp = await client.post(served.url(api) + path, json=body)
    assert resp.status_code == 400
    message = resp.json()[where[0]][where[1]]
    assert message.startswith("Chorus budget reached: this job spent $0.01")
    assert served.server.requests == []
    assert served.sink.events == []


async def test_a_client_that_goes_away_closes_the_upstream_request(served: Served) -> None:
    served.server.script([slow_text("x " * 40, chunks=40, delay=0.25)])
    async with httpx.AsyncClient() as client:
        url = served.url("anthropic") + "/v1/messages"
        async with client.stream("POST", url, json=MESSAGES) as resp:
            async for _ in resp.aiter_raw():
                break  # the first chunk, then hang up
    recorded = await asyncio.to_thread(served.server.wait_for, _finished, 10)
    assert recorded[0].disconnected
    [(_, event)] = served.sink.events
    assert not event.complete
    assert event.usage.input_tokens == 100  # message_start was read: its input is spent


def _finished(requests: list[RecordedRequest]) -> bool:
    return bool(requests) and requests[0].finished


@pytest.mark.parametrize("tamper", ["token", "ref", "api"])
async def test_a_wrong_token_or_a_forged_upstream_is_a_bare_404(
    served: Served, tamper: str
) -> None:
    url = served.url("openai")
    if tamper == "token":
        url = url.replace(session_token(served.channel.key, "s1"), "s1.00000000")
    elif tamper == "ref":  # another session's signed upstream
        url = url.rsplit("/", 1)[0] + "/" + served.url("openai", session="s2").rsplit("/", 1)[1]
    else:
        url = url.replace("/meter/openai/", "/meter/gemini/")
    async with httpx.AsyncClient() as client:
        resp = await client.post(url + "/v1/responses", json=RESPONSES)
    assert resp.status_code == 404
    assert resp.text == "not found"
    assert served.server.requests == []


async def test_a_request_over_the_size_limit_is_refused(served: Served) -> None:
    served.meter.max_request_bytes = 1000
    async with httpx.AsyncClient() as client:
        resp = await client.post(
            served.url("openai") + "/v1/responses", content=json.dumps({"x": "y" * 2000})
        )
    assert resp.status_code == 413
    assert resp.json()["error"]["code"] == "request_too_large"
    assert served.server.requests == []


async def test_a_path_cannot_carry_a_request_to_another_host(served: Served) -> None:
    async with httpx.AsyncClient() as client:
        resp = await client.post(served.url("openai") + "//127.0.0.2:9/@evil/x", json={})
    assert resp.status_code == 404  # the scripted server's own answer: it got the request
    [seen] = served.server.requests
    assert seen.path.endswith("/127.0.0.2:9/@evil/x")  # a path on the signed upstream


#: What may differ between two answers of one upstream, straight and through the meter:
#: the time, and how the connection is kept (hop by hop, never forwarded).
_PER_HOP = {"date", "connection", "keep-alive", "transfer-encoding"}


def _end_to_end(resp: httpx.Response) -> list[tuple[str, str]]:
    return [(k.lower(), v) for k, v in resp.headers.multi_items() if k.lower() not in _PER_HOP]


@pytest.mark.parametrize("kind", ["rate_limit", "overloaded", "server_error"])
@pytest.mark.parametrize(
    ("api", "path", "body"),
    [
        ("anthropic", "/v1/messages", MESSAGES),
        ("openai", "/v1/responses", RESPONSES),
        ("gemini", GEMINI_PATH, GEMINI),
    ],
)
async def test_a_429_or_5xx_reaches_the_cli_exactly_as_the_provider_sent_it(
    served: Served, api: str, path: str, body: dict[str, object], kind: ErrorKind
) -> None:
    served.server.script([error(kind), error(kind)])
    async with httpx.AsyncClient() as client:
        straight = await client.post(served.server.url + path, json=body)
        through = await client.post(served.url(api) + path, json=body)
    assert straight.status_code in (429, 500, 503, 529)
    assert through.status_code == straight.status_code
    assert _end_to_end(through) == _end_to_end(straight)
    assert through.content == straight.content
    assert len(served.server.requests) == 2  # one each: the meter did not retry


@asynccontextmanager
async def _raw_upstream(
    answer: Callable[[asyncio.StreamWriter], Awaitable[None]],
) -> AsyncIterator[str]:
    """An upstream that reads one request per connection, then runs ``answer``."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = re.search(rb"(?i)content-length: *(\d+)", head)
        await reader.readexactly(int(length.group(1)) if length else 0)
        with contextlib.suppress(ConnectionError):
            await answer(writer)
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    async with server:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"


_SSE_HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"


async def test_a_slow_upstream_is_waited_for_as_long_as_it_takes(served: Served) -> None:
    """Past httpx's default 5 s read timeout: a model may think for minutes before its
    first byte; only the CLI's own timeout applies."""
    event = b'event: ping\ndata: {"type": "ping"}\n\n'

    async def slow(writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(6)
        writer.write(_SSE_HEAD + b"content-length: %d\r\n\r\n" % len(event) + event)
        await writer.drain()

    async with _raw_upstream(slow) as upstream, httpx.AsyncClient(timeout=60) as client:
        started = time.monotonic()
        resp = await client.post(
            served.url("anthropic", upstream=upstream) + "/v1/messages", json=MESSAGES
        )
    assert time.monotonic() - started >= 6
    assert resp.status_code == 200
    assert resp.content == event


async def test_an_upstream_that_breaks_off_mid_stream_breaks_the_clients_stream(
    served: Served,
) -> None:
    """Not a clean end the CLI would take for a whole answer: the stream breaks."""
    first = b'event: message_start\ndata: {"type": "message_start"}\n\n'

    async def broken(writer: asyncio.StreamWriter) -> None:
        writer.write(_SSE_HEAD + b"content-length: 10000\r\n\r\n" + first)
        await writer.drain()

    async with _raw_upstream(broken) as upstream, httpx.AsyncClient(timeout=60) as client:
        url = served.url("anthropic", upstream=upstream) + "/v1/messages"
        got, broke = await _read(client, url)
    assert got == first
    assert isinstance(broke, httpx.RemoteProtocolError)
    [(_, event)] = served.sink.events
    assert not event.complete


async def _read(client: httpx.AsyncClient, url: str) -> tuple[bytes, Exception | None]:
    """What a streamed answer gave before it ended, and how it broke (None: whole)."""
    got = b""
    try:
        async with client.stream("POST", url, json=MESSAGES) as resp:
            async for chunk in resp.aiter_raw():
                got += chunk
    except httpx.HTTPError as exc:
        return got, exc
    return got, None
