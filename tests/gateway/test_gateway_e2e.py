"""End to end through the gateway: a brain on TCP drives the real agent CLIs, which talk
to the scripted model server. Every body that is installed runs the same checks."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import pytest

from chorus.events import (
    CompatibilityWarning,
    ControlRequestEvent,
    ControlResponseEvent,
    Event,
    Queued,
    SessionStarted,
    Text,
    TextDelta,
    TurnCompleted,
    TurnFailed,
)
from chorus.gateway import GatewayCode, ResponseError
from chorus.store import ControlStatus
from chorus.testing import slow_text, text

if TYPE_CHECKING:
    from conftest import Harness

pytestmark = pytest.mark.e2e
BODIES = ["claude", "codex", "gemini"]


def _needs(harness: Harness, cli: str) -> None:
    if cli not in harness.clis:
        pytest.skip(f"{cli} CLI not installed")


def _texts(events: list[Event]) -> str:
    complete = "".join(e.text for e in events if isinstance(e, Text))
    return complete or "".join(e.text for e in events if isinstance(e, TextDelta))


def _turn_end(event: Event) -> bool:
    return isinstance(event, TurnCompleted | TurnFailed)


@pytest.mark.parametrize("cli", BODIES)
async def test_initialize_user_events_result(harness: Harness, cli: str) -> None:
    _needs(harness, cli)
    harness.server.script([text("hello from the body")])
    async with harness.client() as brain:
        info = await harness.open_session(brain, cli)
        assert info["body"] == cli
        assert info["replay_from"] == 1
        assert info["resumed"] is False
        await brain.send_user("say hello")
        events = await brain.until(_turn_end, timeout=90)
    assert isinstance(events[-1], TurnCompleted), events[-1]
    assert "hello from the body" in _texts(events)
    queued = [e for e in events if isinstance(e, Queued)]
    assert [q.text for q in queued] == ["say hello"]
    seqs = [e.seq for e in events]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))  # in order, no gap, no duplicate
    assert all(e.session_id == info["session_id"] for e in events)
    assert harness.server.turn_requests()  # the CLI really called the model
    stored = await harness.store.read_events(info["session_id"])
    assert [e.seq for e in stored][-len(events) :] == seqs


@pytest.mark.parametrize("cli", BODIES)
async def test_set_model_is_answered_and_recorded(harness: Harness, cli: str) -> None:
    _needs(harness, cli)
    harness.server.script([text("after the switch")])
    async with harness.client() as brain:
        info = await harness.open_session(brain, cli)
        answer = await brain.request("set_model", model="model-two", request_id="switch-1")
        assert answer == {"model": "model-two"}
        status = await brain.request("status")
        assert status["model"] == "model-two"
        await brain.send_user("go on")
        events = await brain.until(_turn_end, timeout=90)
    assert isinstance(events[-1], TurnCompleted)
    record = await harness.store.get_control_request(info["session_id"], "switch-1")
    assert record.status is ControlStatus.OK
    assert record.subtype == "set_model"
    session = await harness.store.get_session(info["session_id"])
    assert session.model == "model-two"
    logged = await harness.store.read_events(info["session_id"])
    assert any(isinstance(e, ControlRequestEvent) and e.request_id == "switch-1" for e in logged)
    assert any(isinstance(e, ControlResponseEvent) and e.request_id == "switch-1" for e in logged)


@pytest.mark.parametrize("cli", BODIES)
async def test_interrupt_stops_a_slow_turn(harness: Harness, cli: str) -> None:
    _needs(harness, cli)
    harness.server.script([slow_text("one two three four five six", chunks=30, delay=0.3)])
    async with harness.client() as brain:
        await harness.open_session(brain, cli)
        await brain.send_user("talk slowly")
        await brain.until(lambda e: isinstance(e, TextDelta), timeout=60)
        started = asyncio.get_running_loop().time()
        answer = await brain.request("interrupt", timeout=30)
        events = await brain.until(_turn_end, timeout=30)
        elapsed = asyncio.get_running_loop().time() - started
        assert answer["interrupted"] is True
        assert elapsed < 8.0  # far less than the 9 s the scripted stream would take
        status = await brain.request("status")
        assert status["state"] in ("idle", "ended")
    assert isinstance(events[-1], TurnFailed | TurnCompleted)


async def test_unknown_subtype_gets_an_error_and_a_warning(harness: Harness) -> None:
    _needs(harness, "claude")
    async with harness.client() as brain:
        await harness.open_session(brain, "claude")
        with pytest.raises(ResponseError) as caught:
            await brain.request("teleport", destination="mars", request_id="odd-1")
        assert caught.value.code == GatewayCode.UNSUPPORTED
        assert caught.value.request_id == "odd-1"
        warning = await brain.until(lambda e: isinstance(e, CompatibilityWarning), timeout=10)
        assert warning[-1].control == "teleport"  # type: ignore[union-attr]
        # The connection and the session still work.
        assert (await brain.request("status"))["state"] == "idle"
    metrics = harness.gateway.metrics.render()
    assert (
        'chorus_gateway_unsupported_subtype_total{body="claude",subtype="unknown"} 1.0' in metrics
    )


async def test_control_the_body_cannot_do_is_refused_with_a_warning(harness: Harness) -> None:
    _needs(harness, "gemini")  # Gemini over ACP declares steer unsupported
    async with harness.client() as brain:
        await harness.open_session(brain, "gemini")
        reply = await brain.call("steer", text="left a bit")
        assert reply.response.subtype == "error"
        assert reply.response.error_code == GatewayCode.UNSUPPORTED
        events = await brain.until(lambda e: isinstance(e, CompatibilityWarning), timeout=10)
    warning = events[-1]
    assert isinstance(warning, CompatibilityWarning)
    assert warning.control == "steer"


async def test_reconnect_mid_stream_replays_with_no_gap_and_no_duplicate(
    harness: Harness,
) -> None:
    _needs(harness, "claude")
    harness.server.script([slow_text(" ".join(f"w{i}" for i in range(24)), chunks=24, delay=0.1)])
    async with harness.client() as first:
        info = await harness.open_session(first, "claude")
        await first.send_user("stream for a while")
        before = await first.until(lambda e: isinstance(e, TextDelta), timeout=60)
        before += first.drain()
        last_seen = first.last_seq
        assert last_seen == before[-1].seq
    # The first brain is gone mid-stream; the turn goes on without it.
    await asyncio.sleep(0.3)
    async with harness.client() as second:
        again = await second.request(
            "initialize", resume=info["session_id"], last_seq=last_seen, timeout=30
        )
        assert again["resumed"] is True
        assert again["replay_from"] == last_seen + 1
        after = await second.until(_turn_end, timeout=60)
    assert isinstance(after[-1], TurnCompleted)
    seen = [e.seq for e in before] + [e.seq for e in after]
    assert seen == list(range(1, len(seen) + 1))  # every seq once, in order, from the start
    stored = await harness.store.read_events(info["session_id"], limit=len(seen))
    assert [e.seq for e in stored] == seen
    texts = [e.text for e in before + after if isinstance(e, TextDelta)]
    assert "".join(texts).split() == [f"w{i}" for i in range(24)]


async def test_repeated_request_id_is_answered_from_the_log(harness: Harness) -> None:
    _needs(harness, "claude")
    async with harness.client() as brain:
        info = await harness.open_session(brain, "claude")
        first = await brain.call("set_permission_mode", mode="plan", request_id="mode-1")
        again = await brain.call("set_permission_mode", mode="default", request_id="mode-1")
        assert first.response.subtype == "success"
        assert again == first  # replayed, not run again
        assert (await brain.request("status"))["permission_mode"] == "plan"
    records = await harness.store.list_control_requests(info["session_id"])
    assert [r.request_id for r in records].count("mode-1") == 1


async def test_queued_messages_run_in_order(harness: Harness) -> None:
    _needs(harness, "claude")
    harness.server.script([slow_text("first answer", chunks=4, delay=0.2), text("second answer")])
    async with harness.client() as brain:
        await harness.open_session(brain, "claude")
        await brain.send_user("one")
        await brain.send_user("two")
        events = await brain.until(_turn_end, timeout=60)
        events += await brain.until(_turn_end, timeout=60)
    queued = [e for e in events if isinstance(e, Queued)]
    assert [(q.text, q.position) for q in queued] == [("one", 0), ("two", 1)]
    ends = [e for e in events if isinstance(e, TurnCompleted)]
    assert [e.result for e in ends] == ["first answer", "second answer"]


async def test_session_started_reaches_a_late_brain_from_the_log(harness: Harness) -> None:
    _needs(harness, "claude")
    harness.server.script([text("done")])
    async with harness.client() as brain:
        info = await harness.open_session(brain, "claude")
        await brain.send_user("hi")
        await brain.until(_turn_end, timeout=60)
    async with harness.client() as late:
        await late.request("initialize", resume=info["session_id"], last_seq=0)
        replayed = await late.until(_turn_end, timeout=10)
    assert replayed[0].seq == 1
    assert any(isinstance(e, SessionStarted) for e in replayed)
