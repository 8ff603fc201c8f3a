"""Outbound: Chorus dials a (fake) brain's WebSocket server and serves UCP v1 on the
link; drops are redialed within bounds, and the brain re-attaches with replay."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import pytest
from websockets.asyncio.server import Server, ServerConnection, serve

from chorus.events import (
    ControlRequest,
    ControlResponse,
    Event,
    EventFrame,
    RequestBody,
    TextDelta,
    TurnCompleted,
    UserContent,
    UserMessage,
    parse_outbound,
)
from chorus.gateway import BrainConfig, BrainUrlError, GatewaySettings
from chorus.testing import Reply, slow_text

if TYPE_CHECKING:
    from conftest import GatewayFactory, Harness, SettingsFactory


class BrainSide:
    """The brain's end of one link: it asks, Chorus answers."""

    def __init__(self, ws: ServerConnection) -> None:
        self.ws = ws
        self.events: list[Event] = []
        self._ids = 0

    async def request(self, subtype: str, **fields: Any) -> ControlResponse:
        self._ids += 1
        rid = f"brain-{self._ids}"
        frame = ControlRequest(request_id=rid, request=RequestBody(subtype=subtype, **fields))
        await self.ws.send(frame.model_dump_json())
        async with asyncio.timeout(60):
            while True:
                got = await self._frame()
                if isinstance(got, ControlResponse) and got.response.request_id == rid:
                    return got

    async def user(self, text: str) -> None:
        await self.ws.send(UserMessage(message=UserContent(content=text)).model_dump_json())

    async def until(self, kind: type[Event]) -> Event:
        async with asyncio.timeout(60):
            while True:
                await self._frame()
                if self.events and isinstance(self.events[-1], kind):
                    return self.events[-1]

    async def _frame(self) -> Any:
        frame = parse_outbound(await self.ws.recv())
        if isinstance(frame, EventFrame):
            self.events.append(frame.event)
        return frame


class FakeBrain:
    """A WebSocket server standing in for a remote brain; each dial from Chorus
    arrives on :attr:`links`, and stays open until the test closes it."""

    def __init__(self) -> None:
        self.links: asyncio.Queue[BrainSide] = asyncio.Queue(16)
        self.server: Server | None = None

    @property
    def url(self) -> str:
        assert self.server is not None
        port = next(iter(self.server.sockets)).getsockname()[1]
        return f"ws://127.0.0.1:{port}/brain"

    async def _handler(self, ws: ServerConnection) -> None:
        await self.links.put(BrainSide(ws))
        await ws.wait_closed()

    async def next_link(self, timeout: float = 15) -> BrainSide:  # noqa: ASYNC109
        return await asyncio.wait_for(self.links.get(), timeout)


@pytest.fixture
async def brain(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeBrain]:
    monkeypatch.setenv("CHORUS_ALLOW_INSECURE_BRAIN", "1")
    fake = FakeBrain()
    async with serve(fake._handler, "127.0.0.1", 0) as server:
        fake.server = server
        yield fake


@contextlib.asynccontextmanager
async def _gateway(
    start_gateway: GatewayFactory, gateway_settings: SettingsFactory, **brain: Any
) -> AsyncIterator[Harness]:
    config = GatewaySettings(
        gateway=gateway_settings().gateway, brain=BrainConfig(backoff_base_s=0.05, **brain)
    )
    async with start_gateway(config) as harness:
        yield harness


async def _wait_state(harness: Harness, state: str, timeout: float = 15) -> dict[str, Any]:  # noqa: ASYNC109
    """Poll the link status (it has no change notification) until it reaches ``state``."""
    async with asyncio.timeout(timeout):
        while True:
            status = harness.gateway.brain.status()
            if status["state"] == state:
                return status
            await asyncio.sleep(0.05)


def slow_text_reply() -> Reply:
    return slow_text("served over an outbound link", chunks=6, delay=0.15)


async def test_chorus_dials_the_brain_and_serves_a_session(
    brain: FakeBrain, start_gateway: GatewayFactory, gateway_settings: SettingsFactory
) -> None:
    async with _gateway(start_gateway, gateway_settings) as harness:
        if "claude" not in harness.clis:
            pytest.skip("claude CLI not installed")
        harness.server.script([slow_text_reply()])
        await harness.gateway.brain.connect(brain.url)
        link = await brain.next_link()
        status = await link.request("status")
        assert status.response.subtype == "success"
        init = await link.request("initialize", body="claude", cwd=str(harness.work))
        assert init.response.subtype == "success"
        await link.user("hello over the link")
        done = await link.until(TurnCompleted)
        assert isinstance(done, TurnCompleted)
        assert done.result == "served over an outbound link"
        assert (await _wait_state(harness, "connected"))["dials"] == 1
        await harness.gateway.brain.disconnect()
        assert harness.gateway.brain.status()["state"] == "stopped"


async def test_a_dropped_link_is_redialed_and_the_brain_replays(
    brain: FakeBrain, start_gateway: GatewayFactory, gateway_settings: SettingsFactory
) -> None:
    async with _gateway(start_gateway, gateway_settings) as harness:
        if "claude" not in harness.clis:
            pytest.skip("claude CLI not installed")
        harness.server.script([slow_text_reply()])
        await harness.gateway.brain.connect(brain.url)
        first = await brain.next_link()
        init = await first.request("initialize", body="claude", cwd=str(harness.work))
        session_id = init.response.response["session_id"]  # type: ignore[union-attr]
        await first.user("stream please")
        await first.until(TextDelta)
        seen = [e.seq for e in first.events]
        await first.ws.close(1011, "brain restarting")  # an outage, not a goodbye
        second = await brain.next_link()
        again = await second.request("initialize", resume=session_id, last_seq=seen[-1])
        assert again.response.subtype == "success"
        await second.until(TurnCompleted)
        seqs = seen + [e.seq for e in second.events]
        assert seqs == list(range(1, len(seqs) + 1))  # no gap, no duplicate across the drop
        status = await _wait_state(harness, "connected")
        assert status["dials"] == 2
        metrics = harness.gateway.metrics.render()
        assert "chorus_gateway_reconnect_attempts_total 1.0" in metrics


async def test_an_unreachable_brain_is_given_up_after_bounded_dials(
    start_gateway: GatewayFactory,
    gateway_settings: SettingsFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CHORUS_ALLOW_INSECURE_BRAIN", "1")
    async with _gateway(start_gateway, gateway_settings, max_attempts=3) as harness:
        started = asyncio.get_running_loop().time()
        await harness.gateway.brain.connect("ws://127.0.0.1:9/nobody-listens")
        status = await _wait_state(harness, "failed")
        elapsed = asyncio.get_running_loop().time() - started
        assert status["dials"] == 3
        assert status["last_error"]
        assert 0.15 <= elapsed < 10  # backoff 0.05 then 0.1 between the three dials
        assert "chorus_gateway_reconnect_attempts_total 2.0" in harness.gateway.metrics.render()


async def test_a_brain_that_says_goodbye_is_not_redialed(
    brain: FakeBrain, start_gateway: GatewayFactory, gateway_settings: SettingsFactory
) -> None:
    async with _gateway(start_gateway, gateway_settings) as harness:
        await harness.gateway.brain.connect(brain.url)
        link = await brain.next_link()
        await link.ws.close(1000, "done for today")
        status = await _wait_state(harness, "closed")
        assert status["dials"] == 1
        assert brain.links.empty()


async def test_insecure_and_unlisted_brains_are_refused(
    start_gateway: GatewayFactory,
    gateway_settings: SettingsFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("CHORUS_ALLOW_INSECURE_BRAIN", raising=False)
    async with _gateway(
        start_gateway, gateway_settings, url_allowlist=[r"wss://ok\.example/.*"]
    ) as h:
        with pytest.raises(BrainUrlError, match="unencrypted"):
            await h.gateway.brain.connect("ws://127.0.0.1:1234/")
        with pytest.raises(BrainUrlError, match="allowlist"):
            await h.gateway.brain.connect("wss://other.example/ucp")
        assert h.gateway.brain.status()["state"] == "none"
