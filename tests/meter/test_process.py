"""The meter's process and its daemon's budget: with a daemon that pushes verdicts
a session allowed goes at once (no question), a session not known or refused is
asked about, and a request after a record waits for the daemon's word on it; a
daemon that does not push (an older one) is asked before each request."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

import pytest

from chorus.meter._process import MeterProcess


class Wire:
    """The daemon's end of the link: what the meter wrote to it."""

    def __init__(self) -> None:
        self.lines: list[dict[str, Any]] = []

    def write(self, data: bytes) -> None:
        self.lines.extend(json.loads(line) for line in data.splitlines())

    def is_closing(self) -> bool:
        return False

    def asked(self) -> list[str]:
        return [m["channel"] for m in self.lines if m.get("op") == "admit"]


@pytest.fixture
def meter(tmp_path: Path) -> tuple[MeterProcess, Wire]:
    (tmp_path / "meter").mkdir()
    (tmp_path / "channel.key").write_bytes(os.urandom(32))
    process = MeterProcess(tmp_path, 60.0)
    wire = Wire()
    process.link.writer = wire  # type: ignore[assignment]
    return process, wire


def tell(process: MeterProcess, **message: Any) -> None:
    process._told(json.dumps(message).encode())


def answer(process: MeterProcess, wire: Wire, why: str | None) -> None:
    """The daemon answers the last question asked."""
    last = [m for m in wire.lines if m.get("op") == "admit"][-1]
    tell(process, op="verdict", id=last["id"], channel=last["channel"], why=why)


async def until(check: Any) -> None:
    for _ in range(500):
        if check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition not met in time")


async def settle(verdict: str | Awaitable[str | None] | None) -> str | None:
    return verdict if verdict is None or isinstance(verdict, str) else await verdict


async def test_a_daemon_that_pushes_is_asked_about_a_session_once(
    meter: tuple[MeterProcess, Wire],
) -> None:
    process, wire = meter
    tell(process, op="hello", secrets={}, ask=True, push=True, upto=0, sessions={})
    first = asyncio.ensure_future(settle(process.admit("s1", "openai")))
    await until(wire.asked)
    answer(process, wire, None)
    assert await first is None
    assert process.admit("s1", "openai") is None  # at once: no question, no wait
    assert wire.asked() == ["s1"]

    tell(process, op="budget", upto=0, sessions={"s1": "daily_usd reached"})
    tell(process, op="secrets", secrets={}, ask=True, verdicts={"s1": None})  # older word
    refused = asyncio.ensure_future(settle(process.admit("s1", "openai")))
    await until(lambda: wire.asked() == ["s1", "s1"])  # a refusal is the daemon's to make
    answer(process, wire, "daily_usd reached")
    assert await refused == "daily_usd reached"


async def test_a_request_after_a_record_waits_for_the_daemons_word_on_it(
    meter: tuple[MeterProcess, Wire],
) -> None:
    process, wire = meter
    tell(process, op="hello", secrets={}, ask=True, push=True, upto=0, sessions={"s1": None})
    assert process.admit("s1", "openai") is None
    process.record_fields("s1", {"type": "metered", "api": "openai"})
    end = wire.lines[-1]["end"]
    waiting = asyncio.ensure_future(settle(process.admit("s1", "openai")))
    await asyncio.sleep(0.05)
    assert not waiting.done()  # the daemon has not taken the record yet
    tell(process, op="budget", upto=end, sessions={"s1": "per_job_usd reached"})
    await until(lambda: wire.asked() == ["s1"])  # the pushed refusal, confirmed
    answer(process, wire, "per_job_usd reached")
    assert await waiting == "per_job_usd reached"

    tell(process, op="budget", upto=end, sessions={"s1": None})
    process.record_fields("s1", {"type": "metered", "api": "openai"})
    later = wire.lines[-1]["end"]
    waiting = asyncio.ensure_future(settle(process.admit("s1", "openai")))
    await asyncio.sleep(0.05)
    assert not waiting.done()
    tell(process, op="budget", upto=later)  # taken, the verdicts unchanged
    assert await waiting is None
    assert wire.asked() == ["s1"]


async def test_a_daemon_that_does_not_push_is_asked_before_each_request(
    meter: tuple[MeterProcess, Wire],
) -> None:
    process, wire = meter
    tell(process, op="hello", secrets={}, ask=True, verdicts={})
    for n in range(3):
        verdict = asyncio.ensure_future(settle(process.admit("s1", "openai")))
        await until(lambda n=n: wire.asked() == ["s1"] * (n + 1))  # each time
        answer(process, wire, None)
        assert await verdict is None


async def test_without_a_budget_or_a_daemon_nothing_is_asked(
    meter: tuple[MeterProcess, Wire],
) -> None:
    process, wire = meter
    tell(process, op="hello", secrets={}, ask=False, push=True, upto=0, sessions={})
    assert process.admit("s1", "openai") is None
    tell(process, op="secrets", secrets={}, ask=True)
    process.link.drop(process.link.writer)  # type: ignore[arg-type]
    assert process.admit("s1", "openai") is None  # no daemon: the last verdict holds
    assert wire.asked() == []
