"""The meter as the daemon serves it: a route of the sessions' channel listener on
loopback, forwarding to the scripted model server. Chunks pass as they come, the
provider's errors pass verbatim, an upstream that is down is a 502 in the API's own
shape, a budget refusal never reaches the upstream, a client that goes away closes
the upstream request, and each request's usage reaches the sink."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from chorus.bodies import Channel, channel_key, session_token
from chorus.events import Metered
from chorus.mcpserver import channel_running
from chorus.meter import MeterApp, meter_url
from chorus.testing import ModelServer, error, slow_text, text
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
