"""Session lifetimes with the real Claude CLI: sessions outlive connections, a closed
or crashed body is reported and restarted with the CLI's native resume, and sessions
nobody uses are closed."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from typing import TYPE_CHECKING

import pytest

from chorus.events import Event, Notice, SessionEnded, TurnCompleted, TurnFailed
from chorus.gateway import GatewayCode, ResponseError
from chorus.testing import text

if TYPE_CHECKING:
    from conftest import GatewayFactory, Harness, SettingsFactory

pytestmark = pytest.mark.e2e


def _turn_end(event: Event) -> bool:
    return isinstance(event, TurnCompleted | TurnFailed)


async def _gone(harness: Harness, session_id: str, timeout: float = 20) -> None:  # noqa: ASYNC109
    """Wait until the hub has dropped the session (its driver recorded the end)."""
    async with asyncio.timeout(timeout):
        while True:  # the hub has no change notification; poll it
            if harness.gateway.hub.get(session_id) is None:
                return
            await asyncio.sleep(0.05)


@pytest.fixture(autouse=True)
def _claude(harness: Harness) -> None:
    if "claude" not in harness.clis:
        pytest.skip("claude CLI not installed")


async def test_closed_session_resumes_natively_in_the_same_log(harness: Harness) -> None:
    harness.server.script([text("remember the word pelican"), text("the word was pelican")])
    async with harness.client() as brain:
        info = await harness.open_session(brain, "claude")
        sid = info["session_id"]
        await brain.send_user("remember a word")
        first = await brain.until(_turn_end, timeout=60)
        live = harness.gateway.hub.get(sid)
        assert live is not None
        await live.close()
        first += await brain.until(lambda e: isinstance(e, SessionEnded), timeout=20)
        await _gone(harness, sid)
        with pytest.raises(ResponseError) as caught:
            await brain.request("set_model", model="x")
        assert caught.value.code == GatewayCode.SESSION_ENDED
    seen = {e.seq for e in first}
    async with harness.client() as brain:  # a new connection, as after a network drop
        again = await brain.request("initialize", resume=sid, last_seq=max(seen), timeout=90)
        assert again["resumed"] is True
        assert again["native_session_id"] == info["native_session_id"]
        await brain.send_user("which word?")
        second = await brain.until(_turn_end, timeout=60)
    assert isinstance(first[-1], SessionEnded)
    assert isinstance(second[-1], TurnCompleted)
    assert second[-1].result == "the word was pelican"
    assert min(e.seq for e in second) > max(seen)  # one log, continued
    stored = [e.seq for e in await harness.store.read_events(sid)]
    assert stored == list(range(1, len(stored) + 1))
    last_request = harness.server.turn_requests()[-1]
    assert "remember the word pelican" in json.dumps(last_request.body)  # history came back


async def test_a_crashed_body_is_reported_and_refuses_work(harness: Harness) -> None:
    async with harness.client() as brain:
        info = await harness.open_session(brain, "claude")
        session = harness.gateway.hub.get(info["session_id"])
        assert session is not None
        pid = getattr(session.body, "pid", None)
        assert isinstance(pid, int)
        os.killpg(pid, signal.SIGKILL)
        ended = await brain.until(lambda e: isinstance(e, SessionEnded), timeout=20)
        assert isinstance(ended[-1], SessionEnded)
        assert ended[-1].reason == "crashed"
        await _gone(harness, info["session_id"])
        await brain.send_user("are you there?")
        assert (await brain.rejection()).error_code == GatewayCode.SESSION_ENDED
        assert (await brain.request("status"))["state"] == "ended"
    record = await harness.store.get_session(info["session_id"])
    assert record.state == "ended"


async def test_unused_sessions_are_closed(
    start_gateway: GatewayFactory, gateway_settings: SettingsFactory
) -> None:
    async with start_gateway(gateway_settings(session_idle_timeout_s=0.5)) as harness:
        async with harness.client() as brain:
            info = await harness.open_session(brain, "claude")
            await asyncio.sleep(1.0)  # attached: kept even past the idle limit
            assert harness.gateway.hub.get(info["session_id"]) is not None
        await _gone(harness, info["session_id"], timeout=10)
        record = await harness.store.get_session(info["session_id"])
        assert record.state == "ended"


async def test_stopping_the_gateway_closes_every_body(
    start_gateway: GatewayFactory,
) -> None:
    async with start_gateway() as harness, harness.client() as brain:
        info = await harness.open_session(brain, "claude")
        session = harness.gateway.hub.get(info["session_id"])
        assert session is not None
        pid = getattr(session.body, "pid", None)
    assert isinstance(pid, int)
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # reaped: the CLI is gone
    events = await harness.store.read_events(info["session_id"])
    assert isinstance(events[-1], SessionEnded | Notice)
    assert any(isinstance(e, SessionEnded) for e in events)
