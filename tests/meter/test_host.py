"""The meter's own process, as the daemon holds it (``MeterHost``): started on a port
bound at once, linked, forwarding a session's requests with its secrets hidden,
asking the daemon's budget, recording into the spool; left running when the daemon
goes, its records kept for the next one, which adopts the same process; ended when
the daemon stops for good. No other session's token, and no forged one, gets through."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from chorus.bodies import Channel, channel_key, session_token
from chorus.config import run_dir
from chorus.meter import MeterHost, meter_url
from chorus.meter._host import BUDGET_S
from chorus.meter._process import start_time, token_channel
from chorus.testing import ModelServer, shell, slow_text, text

SECRET = "pw-" + "9f8e7d6c5b4a"
HOST = "127.0.0.1"


@dataclass
class Daemonish:
    """What the daemon gives the host: its ledger's answers (the sessions asked
    about, in order), what it keeps; ``spend`` refuses a session once a record of it
    is taken (as the ledger does when a request's cost reaches a limit)."""

    refuse: dict[str, str] = field(default_factory=dict)
    kept: list[dict[str, Any]] = field(default_factory=list)
    asked: list[str] = field(default_factory=list)
    spend: dict[str, str] = field(default_factory=dict)
    slow_s: float = 0.0

    def ingest(self, record: dict[str, Any]) -> None:
        time.sleep(self.slow_s)
        self.kept.append(record)
        channel = record.get("channel")
        if record["kind"] == "metered" and channel in self.spend:
            self.refuse[channel] = self.spend[channel]

    def admit(self, channel: str, api: str) -> str | None:
        self.asked.append(channel)
        return self.verdict(channel, api)

    def verdict(self, channel: str, api: str) -> str | None:
        return self.refuse.get(channel)

    def secrets(self) -> dict[str, str]:
        return {"DB_PASSWORD": SECRET}

    def host(self) -> MeterHost:
        return MeterHost(
            run_dir(), self.ingest, self.admit, self.secrets, orphan_s=60, verdict=self.verdict
        )


@pytest.fixture
async def server(chorus_home: Path) -> AsyncIterator[ModelServer]:
    run_dir().mkdir(parents=True, exist_ok=True)
    channel_key()
    with ModelServer() as scripted:
        yield scripted


async def _until(check: Any, within: float = 30) -> None:
    for _ in range(int(within / 0.05)):
        if check():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("condition not met in time")


def _url(port: int, session: str, upstream: str) -> str:
    return meter_url(Channel(HOST, port, channel_key()), session, "openai", upstream)


BODY = {"model": "gpt-5", "stream": True, "input": f"the password is {SECRET}"}


async def test_the_process_outlives_its_daemon_and_the_next_one_adopts_it(
    server: ModelServer,
) -> None:
    first = Daemonish()
    host = first.host()
    port = host.open()
    host.start()
    server.script([shell("echo [SECRET:DB_PASSWORD] > f"), text("a"), text("b")])
    async with httpx.AsyncClient(timeout=60) as client:
        answer = await client.post(_url(port, "s1", server.url) + "/responses", json=BODY)
        assert answer.status_code == 200
        assert SECRET in answer.text  # the tool call got the value back
        await asyncio.wait_for(host.linked(), 60)
        await _until(lambda: any(r["kind"] == "metered" for r in first.kept))
        pid = json.loads((run_dir() / "meter" / "pid").read_text())
        await host.close(keep=True)  # the daemon goes; bodies (and the meter) stay

        assert start_time(pid["pid"]) == pid["started"]
        again = await client.post(_url(port, "s1", server.url) + "/responses", json=BODY)
        assert again.status_code == 200  # served with no daemon at all

        second = Daemonish(refuse={"s1": "per_job_usd 0.01 reached"})
        adopted = second.host()
        assert adopted.open() == port  # the same process, not another
        adopted.start()
        await asyncio.wait_for(adopted.linked(), 60)
        await _until(lambda: any(r["kind"] == "metered" for r in second.kept))
        metered = [r for r in second.kept if r["kind"] == "metered"]
        assert [r["channel"] for r in metered] == ["s1"]  # the one made while away, once
        refused = await client.post(_url(port, "s1", server.url) + "/responses", json=BODY)
        assert refused.status_code == 400
        assert "per_job_usd" in refused.json()["error"]["message"]
        await adopted.close(keep=False)
    await _until(lambda: start_time(pid["pid"]) is None, 15)
    sent = [r for r in server.requests_of() if r.method == "POST"]
    assert len(sent) == 2  # the refused one never left
    for request in sent:
        assert SECRET not in json.dumps(request.body)
        assert "[SECRET:DB_PASSWORD]" in json.dumps(request.body)


async def test_only_a_sessions_own_token_and_signed_upstream_get_through(
    server: ModelServer,
) -> None:
    host = Daemonish().host()
    port = host.open()
    host.start()
    try:
        own = _url(port, "s1", server.url)
        other = _url(port, "s2", server.url)
        forged = [
            own.replace("/s/s1.", "/s/s2."),  # another session's id, this one's MAC
            own.split("/meter/")[0] + "/meter/" + other.split("/meter/")[1],  # s2's ref
            _aimed(own, "http://127.0.0.1:9"),  # its MAC, another upstream
            f"http://{HOST}:{port}/s/{session_token(os.urandom(32), 's1')}/meter/openai/x.y",
            f"http://{HOST}:{port}/mcp",
        ]
        async with httpx.AsyncClient(timeout=60) as client:
            for url in forged:
                answer = await client.post(url + "/responses", json=BODY)
                assert answer.status_code == 404, url
        assert [r for r in server.requests_of() if r.method == "POST"] == []
    finally:
        await host.close(keep=False)


def _aimed(url: str, upstream: str) -> str:
    head, ref = url.rsplit("/", 1)
    coded = base64.urlsafe_b64encode(upstream.encode()).decode().rstrip("=")
    return f"{head}/{coded}.{ref.split('.', 1)[1]}"


def test_the_processs_token_check_agrees_with_the_channels() -> None:
    key = os.urandom(32)
    token = session_token(key, "abc-1")
    assert token_channel(key, token) == "abc-1"
    assert token_channel(os.urandom(32), token) is None
    assert token_channel(key, token[:-1] + ("0" if token[-1] != "0" else "1")) is None


async def test_the_budget_is_pushed_a_session_asked_about_once(server: ModelServer) -> None:
    """With a budget set, the meter asks about a session once, then goes by the
    verdicts the daemon pushes; a verdict that turns (spend elsewhere, while a request
    streams) stops the next request in the API's error shape, the one in flight
    whole; the refusal is the daemon's (asked again: it ends the job)."""
    daemon = Daemonish()
    host = daemon.host()
    port = host.open()
    host.start()
    server.script([text(f"a{n}") for n in range(4)] + [slow_text("streaming", chunks=10)])
    url = _url(port, "s1", server.url) + "/responses"
    try:
        await asyncio.wait_for(host.linked(), 60)
        async with httpx.AsyncClient(timeout=60) as client:
            for n in range(4):
                answer = await client.post(url, json=BODY)
                assert answer.status_code == 200
                assert f"a{n}" in answer.text
            assert daemon.asked == ["s1"]  # once: the pushed verdicts answered the rest

            async with client.stream("POST", url, json=BODY) as streaming:
                assert streaming.status_code == 200
                daemon.refuse["s1"] = "today's spend $5.00 reached $5.00 (daily_usd)"
                whole = (await streaming.aread()).decode()
            assert whole.count("response.output_text.delta") >= 10  # all of it came
            assert "response.completed" in whole
            await _until(lambda: host._pushed.get("s1") is not None)  # seen and pushed
            await asyncio.sleep(BUDGET_S)  # (the push on its way to the meter)
            refused = await client.post(url, json=BODY)
    finally:
        await host.close(keep=False)
    assert refused.status_code == 400
    error = refused.json()["error"]
    assert error["code"] == "budget_exceeded"
    assert "daily_usd" in error["message"]
    assert daemon.asked == ["s1", "s1"]  # the refusal was the daemon's own
    assert len([r for r in server.requests_of() if r.method == "POST"]) == 5


async def test_a_request_right_after_one_that_reached_the_budget_is_refused(
    server: ModelServer,
) -> None:
    """The request after the one whose cost reached the limit waits for the daemon's
    word on that record: the budget is overshot by the request in flight only."""
    daemon = Daemonish(spend={"s1": "this job spent $0.02 of its $0.01 (per_job_usd)"})
    daemon.slow_s = 0.5  # a busy daemon: the CLI's next request comes first
    host = daemon.host()
    port = host.open()
    host.start()
    server.script([text("first"), text("never")])
    url = _url(port, "s1", server.url) + "/responses"

    def cli() -> tuple[httpx.Response, httpx.Response]:  # a thread: not the daemon's loop
        with httpx.Client(timeout=60) as client:
            return client.post(url, json=BODY), client.post(url, json=BODY)

    try:
        await asyncio.wait_for(host.linked(), 60)
        first, second = await asyncio.to_thread(cli)
    finally:
        await host.close(keep=False)
    assert first.status_code == 200
    assert second.status_code == 400
    assert "per_job_usd" in second.json()["error"]["message"]
    assert len([r for r in server.requests_of() if r.method == "POST"]) == 1


async def test_a_client_that_goes_away_closes_the_upstream_request_and_is_recorded(
    server: ModelServer,
) -> None:
    """Through the meter's own process, as a CLI reaches it: the CLI hanging up closes
    the upstream request, and the record says the answer was cut."""
    daemon = Daemonish()
    host = daemon.host()
    port = host.open()
    host.start()
    server.script([slow_text("x " * 40, chunks=40, delay=0.25)])
    try:
        await asyncio.wait_for(host.linked(), 60)
        async with httpx.AsyncClient(timeout=60) as client:
            url = _url(port, "s1", server.url) + "/responses"
            async with client.stream("POST", url, json=BODY) as resp:
                async for _ in resp.aiter_raw():
                    break  # the first chunk, then hang up
        recorded = await asyncio.to_thread(server.wait_for, _finished, 10)
        await _until(lambda: any(r["kind"] == "metered" for r in daemon.kept))
    finally:
        await host.close(keep=False)
    assert recorded[0].disconnected  # long before its 40 paced deltas
    [event] = [r["event"] for r in daemon.kept if r["kind"] == "metered"]
    assert event["complete"] is False
    assert event["duration_ms"] < 5000


def _finished(requests: list[Any]) -> bool:
    posted = [r for r in requests if r.method == "POST"]
    return bool(posted) and posted[0].finished
