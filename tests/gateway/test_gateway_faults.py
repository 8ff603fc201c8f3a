"""Small faults on the gateway: malformed frames are rate limited,
bad initialize input is invalid_request and leaves no session ``starting``, and the
bearer scheme is case-insensitive."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from websockets.asyncio.client import connect

from chorus.gateway import GatewayCode, PolicyGuards, ResponseError
from chorus.policy import Policy

if TYPE_CHECKING:
    from conftest import GatewayFactory, Harness, SettingsFactory

pytestmark = pytest.mark.faults


async def test_malformed_frames_spend_the_rate_limit_too(
    start_gateway: GatewayFactory, gateway_settings: SettingsFactory
) -> None:
    async with (
        start_gateway(gateway_settings(rate_per_s=0.01, rate_burst=5)) as harness,
        harness.client() as brain,
    ):
        for _ in range(50):
            await brain.send_raw("this is not json")
        answered = 0
        while True:
            try:
                await brain.rejection(timeout=2.0)
            except TimeoutError:
                break
            answered += 1
        assert answered == 5  # the burst; the other 45 were dropped unanswered


async def test_initialize_with_a_nul_in_the_model_is_invalid(harness: Harness) -> None:
    async with harness.client() as brain:
        with pytest.raises(ResponseError) as caught:
            await brain.request(
                "initialize", body="claude", model="sonnet\x00", cwd=str(harness.work)
            )
    assert caught.value.code == GatewayCode.INVALID_REQUEST
    assert [s.state for s in await harness.store.list_sessions()] == []


async def test_a_failed_initialize_leaves_no_session_starting(
    start_gateway: GatewayFactory,
) -> None:
    # Under the policy (as in the daemon) the mode is checked by the session's gate.
    async with (
        start_gateway(guards=PolicyGuards(Policy())) as harness,
        harness.client() as brain,
    ):
        with pytest.raises(ResponseError) as caught:
            await brain.request(
                "initialize", body="claude", cwd=str(harness.work), permission_mode="yolo"
            )
        states = [s.state for s in await harness.store.list_sessions()]
    assert caught.value.code == GatewayCode.INVALID_REQUEST
    assert states == []  # refused before anything was written


@pytest.mark.parametrize("scheme", ["bearer", "BEARER", "Bearer"])
async def test_the_bearer_scheme_is_case_insensitive(harness: Harness, scheme: str) -> None:
    headers = {"Authorization": f"{scheme} {harness.token}"}
    async with connect(harness.url, additional_headers=headers, proxy=None) as ws:
        await ws.send(
            '{"type": "control_request", "request_id": "s", "request": {"subtype": "status"}}'
        )
        answer = await asyncio.wait_for(ws.recv(), 10)
    assert '"success"' in str(answer)


async def test_a_brain_cannot_pick_the_root_or_leave_allowed_cwds(
    start_gateway: GatewayFactory,
    gateway_settings: SettingsFactory,
    work: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """a session's folder is its sandbox's writable root, so a brain may not
    widen its own sandbox; refused before anything is written."""
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    settings = gateway_settings(allowed_cwds=[str(work)])
    async with start_gateway(settings) as harness, harness.client() as brain:
        for cwd in ("/", str(elsewhere)):
            with pytest.raises(ResponseError) as caught:
                await brain.request("initialize", body="claude", cwd=cwd)
            assert caught.value.code == GatewayCode.INVALID_REQUEST
            assert "cwd refused" in str(caught.value)
        assert [s.state for s in await harness.store.list_sessions()] == []
