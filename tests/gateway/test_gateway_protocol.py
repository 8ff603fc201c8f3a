"""The gateway's edges over real WebSockets: bad frames, limits, auth, keep-alive,
deadlines and policy denials. None of these needs a body to exist, so most run
before ``initialize``; a few open a Claude session to check the session side."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import httpx
import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from chorus.events import KeepAlive, parse_outbound
from chorus.gateway import (
    ControlContext,
    GatewayCode,
    ResponseError,
    UcpClient,
)

if TYPE_CHECKING:
    from conftest import GatewayFactory, Harness, SettingsFactory


async def _status_works(brain: UcpClient) -> None:
    status = await brain.request("status", timeout=10)
    assert status["ucp_version"] == 1


# -- bad frames --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("frame", "code", "request_id"),
    [
        ("this is not json", GatewayCode.INVALID_JSON, ""),
        ('{"type": "control_request", "request_id": "r1"', GatewayCode.INVALID_JSON, ""),
        ("[1, 2, 3]", GatewayCode.INVALID_REQUEST, ""),
        ('{"type": "telepathy"}', GatewayCode.INVALID_REQUEST, ""),
        ('{"type": "control_request", "request_id": "r2"}', GatewayCode.INVALID_REQUEST, "r2"),
        (
            '{"type": "control_request", "request_id": "r3", "request": {"subtype": 5}}',
            GatewayCode.INVALID_REQUEST,
            "r3",
        ),
        ('{"type": "user", "message": {"role": "robot"}}', GatewayCode.INVALID_REQUEST, ""),
        ("[" * 100 + "]" * 100, GatewayCode.INVALID_JSON, ""),
        ('{"a": NaN}', GatewayCode.INVALID_JSON, ""),
    ],
)
async def test_bad_frames_get_an_error_and_the_connection_stays(
    harness: Harness, frame: str, code: GatewayCode, request_id: str
) -> None:
    async with harness.client() as brain:
        if request_id:  # the error answer carries the id the frame meant to use
            body = (await brain.call_raw(request_id, frame)).response
        else:
            await brain.send_raw(frame)
            body = await brain.rejection()
        assert body.subtype == "error"
        assert body.error_code == code
        assert body.request_id == request_id
        await _status_works(brain)


async def test_bad_binary_frame_is_refused_too(harness: Harness) -> None:
    async with harness.client() as brain:
        await brain.send_raw(b"\xff\xfe not utf-8")
        assert (await brain.rejection()).error_code == GatewayCode.INVALID_JSON
        await _status_works(brain)


async def test_oversized_frame_is_refused_before_parsing(
    start_gateway: GatewayFactory, gateway_settings: SettingsFactory
) -> None:
    async with start_gateway(gateway_settings(max_frame_bytes=4096)) as harness:
        big = json.dumps({"type": "control_request", "request_id": "big", "request": {
            "subtype": "status", "pad": "x" * 5000}})  # fmt: skip
        async with harness.client() as brain:
            await brain.send_raw(big)
            rejection = await brain.rejection()
            assert rejection.error_code == GatewayCode.FRAME_TOO_LARGE
            assert rejection.request_id == ""  # never parsed, so its id is unknown
            await _status_works(brain)
        metrics = harness.gateway.metrics.render()
        assert 'chorus_gateway_rejected_frames_total{code="frame_too_large"} 1.0' in metrics


async def test_message_above_the_transport_cap_closes_only_that_connection(
    start_gateway: GatewayFactory, gateway_settings: SettingsFactory
) -> None:
    capped = gateway_settings(max_frame_bytes=4096, max_message_bytes=16384)
    async with start_gateway(capped) as harness:
        async with harness.client() as brain:
            await brain.send_raw("x" * 20000)
            await asyncio.wait_for(brain.connection.wait_closed(), 10)
            assert brain.connection.close_code == 1009
        async with harness.client() as other:  # the gateway is unaffected
            await _status_works(other)


async def test_user_message_before_initialize_is_refused(harness: Harness) -> None:
    async with harness.client() as brain:
        await brain.send_user("hello?")
        rejection = await brain.rejection()
        assert rejection.error_code == GatewayCode.NOT_INITIALIZED
        with pytest.raises(ResponseError) as caught:
            await brain.request("set_model", model="x")
        assert caught.value.code == GatewayCode.NOT_INITIALIZED


async def test_status_before_initialize_describes_the_gateway(harness: Harness) -> None:
    async with harness.client() as brain:
        status = await brain.request("status")
    assert status["sessions"] == []
    assert status["connections"] == 1
    assert "claude" in status["bodies"]
    assert status["tcp"] == harness.url


async def test_known_subtype_with_bad_fields_is_invalid(harness: Harness) -> None:
    async with harness.client() as brain:
        with pytest.raises(ResponseError) as caught:
            await brain.request("initialize", last_seq="many")
    assert caught.value.code == GatewayCode.INVALID_REQUEST


async def test_initialize_with_bad_input_is_refused(harness: Harness) -> None:
    async with harness.client() as brain:
        with pytest.raises(ResponseError) as unknown_body:
            await brain.request("initialize", body="no-such-body", cwd=str(harness.work))
        with pytest.raises(ResponseError) as missing_cwd:
            await brain.request("initialize", body="claude", cwd="/no/such/folder")
        with pytest.raises(ResponseError) as no_session:
            await brain.request("initialize", resume="no-such-session")
    assert unknown_body.value.code == GatewayCode.UNKNOWN_BODY
    assert missing_cwd.value.code == GatewayCode.INVALID_REQUEST
    assert no_session.value.code == GatewayCode.SESSION_NOT_FOUND


# -- auth and origin -----------------------------------------------------------------------


async def test_tcp_needs_the_token(harness: Harness) -> None:
    with pytest.raises(InvalidStatus) as missing:
        await connect(harness.url, proxy=None)
    with pytest.raises(InvalidStatus) as wrong:
        await connect(harness.url, additional_headers={"Authorization": "Bearer wrong"}, proxy=None)
    assert missing.value.response.status_code == 401
    assert wrong.value.response.status_code == 401


async def test_browsers_are_refused_unless_their_origin_is_allowed(
    start_gateway: GatewayFactory, gateway_settings: SettingsFactory
) -> None:
    async with start_gateway(gateway_settings(allowed_origins=["https://dash.example"])) as harness:
        with pytest.raises(InvalidStatus) as refused:
            async with harness.client(origin="https://evil.example"):
                pass
        assert refused.value.response.status_code == 403
        async with harness.client(origin="https://dash.example") as brain:
            await _status_works(brain)


async def test_metrics_over_tcp_need_the_token(harness: Harness) -> None:
    base = harness.url.replace("ws://", "http://").removesuffix("/ucp")
    async with httpx.AsyncClient(base_url=base) as http:
        refused = await http.get("/metrics")
        allowed = await http.get("/metrics", headers={"Authorization": f"Bearer {harness.token}"})
    assert refused.status_code == 401
    assert allowed.status_code == 200
    assert allowed.headers["content-type"].startswith("text/plain; version=0.0.4")
    assert "# TYPE chorus_gateway_requests_total counter" in allowed.text
    assert "chorus_gateway_reconnect_attempts_total 0.0" in allowed.text


# -- limits --------------------------------------------------------------------------------


def _blocking_policy(gate: asyncio.Event) -> Callable[[ControlContext], Awaitable[str | None]]:
    """Hold every request until ``gate`` opens, then deny it (so no body ever starts)."""

    async def policy(context: ControlContext) -> str | None:
        await gate.wait()
        return "held, then denied"

    return policy


async def test_pending_cap_refuses_requests_beyond_it(
    start_gateway: GatewayFactory, gateway_settings: SettingsFactory
) -> None:
    gate = asyncio.Event()
    async with (
        start_gateway(
            gateway_settings(max_pending=3), control_policy=_blocking_policy(gate)
        ) as harness,
        harness.client() as brain,
    ):
        stuck = [
            asyncio.create_task(brain.call("initialize", body="claude", request_id=f"i{n}"))
            for n in range(3)
        ]
        await asyncio.sleep(0.3)  # all three are in flight, held by the policy
        extra = await brain.call("status", request_id="one-too-many")
        assert extra.response.subtype == "error"
        assert extra.response.error_code == GatewayCode.TOO_MANY_PENDING
        gate.set()
        held = await asyncio.gather(*stuck)
        assert {r.response.subtype for r in held} == {"error"}
        assert {r.response.error_code for r in held} == {GatewayCode.POLICY_DENIED}  # type: ignore[union-attr]
        freed = await brain.call("status")  # the slots are free again: no longer too many
        assert freed.response.error_code == GatewayCode.POLICY_DENIED  # type: ignore[union-attr]


async def test_rate_limit_answers_rate_limited(
    start_gateway: GatewayFactory, gateway_settings: SettingsFactory
) -> None:
    async with (
        start_gateway(gateway_settings(rate_per_s=0.01, rate_burst=5)) as harness,
        harness.client() as brain,
    ):
        replies = await asyncio.gather(
            *(brain.call("status", request_id=f"s{n}") for n in range(12))
        )
        codes = [r.response.subtype if r.response.subtype == "success" else
                 r.response.error_code for r in replies]  # fmt: skip
        assert codes.count("success") == 5
        assert codes.count(GatewayCode.RATE_LIMITED) == 7


async def test_deadline_turns_a_hung_request_into_a_timeout(
    start_gateway: GatewayFactory, gateway_settings: SettingsFactory
) -> None:
    gate = asyncio.Event()
    short = gateway_settings(initialize_deadline_s=0.5)
    async with (
        start_gateway(short, control_policy=_blocking_policy(gate)) as harness,
        harness.client() as brain,
    ):
        started = asyncio.get_running_loop().time()
        reply = await brain.call("initialize", body="claude")
        elapsed = asyncio.get_running_loop().time() - started
        assert reply.response.subtype == "error"
        assert reply.response.error_code == GatewayCode.TIMEOUT
        assert elapsed < 5
        gate.set()  # the connection still answers (the policy now denies at once)
        after = await brain.call("status")
        assert after.response.error_code == GatewayCode.POLICY_DENIED  # type: ignore[union-attr]


async def test_policy_denial_is_an_error(start_gateway: GatewayFactory) -> None:
    async def deny_gemini(context: ControlContext) -> str | None:
        return "gemini is off limits" if context.body == "gemini" else None

    async with start_gateway(control_policy=deny_gemini) as harness, harness.client() as brain:
        with pytest.raises(ResponseError) as caught:
            await brain.request("initialize", body="gemini", cwd=str(harness.work))
        assert caught.value.code == GatewayCode.POLICY_DENIED
        assert "off limits" in caught.value.message
        metrics = harness.gateway.metrics.render()
        assert 'chorus_gateway_policy_denials_total{subtype="initialize"} 1.0' in metrics


async def test_a_failing_policy_fails_closed(start_gateway: GatewayFactory) -> None:
    async def broken(context: ControlContext) -> str | None:
        raise RuntimeError("policy bug")

    async with start_gateway(control_policy=broken) as harness, harness.client() as brain:
        with pytest.raises(ResponseError) as caught:
            await brain.request("initialize", body="claude", cwd=str(harness.work))
    assert caught.value.code == GatewayCode.POLICY_DENIED


# -- keep-alive ------------------------------------------------------------------------------


async def test_keepalive_frames_and_idle_timeout(
    start_gateway: GatewayFactory, gateway_settings: SettingsFactory
) -> None:
    async with start_gateway(
        gateway_settings(keepalive_interval_s=0.2, idle_timeout_s=1.0)
    ) as harness:
        async with connect(
            harness.url,
            additional_headers={"Authorization": f"Bearer {harness.token}"},
            proxy=None,
        ) as raw:
            first = parse_outbound(await asyncio.wait_for(raw.recv(), 5))
            assert isinstance(first, KeepAlive)
            await asyncio.wait_for(_until_closed(raw), 10)  # we never send: closed as idle
            assert raw.close_code == 4000
        # A client that sends keep_alive stays connected past the idle limit.
        async with harness.client(keepalive_s=0.2) as brain:
            await asyncio.sleep(1.6)
            await _status_works(brain)
            assert brain.keep_alives >= 3


async def _until_closed(raw: ClientConnection) -> None:
    """Read (keep-alives) until the gateway closes the connection."""
    with contextlib.suppress(ConnectionClosed):
        while True:
            await raw.recv()


# -- sessions -----------------------------------------------------------------------------


async def test_second_initialize_switches_sessions(harness: Harness) -> None:
    if "claude" not in harness.clis:
        pytest.skip("claude CLI not installed")
    async with harness.client() as brain:
        one = await harness.open_session(brain, "claude")
        two = await harness.open_session(brain, "claude")
        assert one["session_id"] != two["session_id"]
        status = await brain.request("status")
        assert status["session_id"] == two["session_id"]
        gateway = await harness.gateway.status()
        assert sorted(gateway["sessions"]) == sorted([one["session_id"], two["session_id"]])


async def test_last_seq_beyond_the_log_is_invalid(harness: Harness) -> None:
    if "claude" not in harness.clis:
        pytest.skip("claude CLI not installed")
    async with harness.client() as brain:
        info = await harness.open_session(brain, "claude")
        with pytest.raises(ResponseError) as caught:
            await brain.request("initialize", resume=info["session_id"], last_seq=10_000)
    assert caught.value.code == GatewayCode.INVALID_REQUEST
