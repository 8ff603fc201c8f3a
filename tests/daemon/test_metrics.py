"""What each event adds to the daemon's series."""

from __future__ import annotations

import asyncio

import pytest
from prometheus_client import CollectorRegistry

from chorus.daemon import _metrics as metrics_module
from chorus.daemon._metrics import DaemonMetrics
from chorus.events import (
    ErrorCode,
    ErrorInfo,
    Handoff,
    JobEnded,
    Notice,
    PermissionDecision,
    SessionEnded,
    SessionStarted,
    TurnCompleted,
    Usage,
)
from chorus.store import StoreError
from tests._wait import until_async


def test_each_event_counts_where_it_belongs() -> None:
    registry = CollectorRegistry()
    metrics = DaemonMetrics(registry)
    crash = ErrorInfo(code=ErrorCode.BODY_CRASHED, message="gone")
    for event in [
        SessionStarted(session_id="s", body="codex", model="gpt-x"),
        TurnCompleted(session_id="s", body="codex", usage=Usage(input_tokens=7), cost_usd=0.5),
        TurnCompleted(session_id="other", body="codex"),
        PermissionDecision(body="codex", request_id="r", decision="deny"),
        PermissionDecision(body="codex", request_id="r2", decision="allow"),
        Notice(body="codex", message="resumed", kind="recovery"),
        Handoff(from_body="codex", to_body="claude", reason=crash),
        JobEnded(body="claude", state="failed", error=crash),
    ]:
        metrics.observe(event)

    def value(name: str, **labels: str) -> float | None:
        return registry.get_sample_value(name, labels)

    assert value("chorus_turns_total", body="codex", model="gpt-x") == 1
    assert value("chorus_turns_total", body="codex", model="default") == 1
    assert value("chorus_tokens_total", body="codex", model="gpt-x", kind="input") == 7
    assert value("chorus_cost_usd_total", body="codex", model="gpt-x") == 0.5
    assert value("chorus_policy_denials_total", body="codex") == 1
    assert value("chorus_body_crashes_total", body="codex") == 1
    assert value("chorus_body_crashes_total", body="claude") == 1
    assert value("chorus_failovers_total", from_body="codex", to_body="claude") == 1
    assert value("chorus_jobs_total", body="claude", state="failed") == 1


def test_a_session_that_ends_is_forgotten_so_thousands_of_them_keep_nothing() -> None:
    registry = CollectorRegistry()
    metrics = DaemonMetrics(registry)
    for n in range(2000):
        metrics.observe(SessionStarted(session_id=f"s{n}", body="codex", model="gpt-x"))
        metrics.observe(TurnCompleted(session_id=f"s{n}", body="codex"))
        metrics.observe(SessionEnded(session_id=f"s{n}", body="codex", reason="closed"))
    assert metrics._models == {}
    assert (
        registry.get_sample_value("chorus_turns_total", {"body": "codex", "model": "gpt-x"}) == 2000
    )


async def test_the_queue_depth_outlives_a_read_the_store_fails(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A shared database away: the poll's read fails; the depth keeps its last value
    and the poll goes on (it used to end there, and its error surfaced at the
    daemon's stop as a failed shutdown)."""
    answers: list[list[str] | StoreError] = [["a"], StoreError("read failed"), ["a", "b"]]

    class Store:
        async def list_jobs(self, *, state: object) -> list[str]:
            answer = answers.pop(0) if len(answers) > 1 else answers[0]
            if isinstance(answer, StoreError):
                raise answer
            return answer

    monkeypatch.setattr(metrics_module, "QUEUE_POLL_S", 0.01)
    registry = CollectorRegistry()
    metrics = DaemonMetrics(registry)
    poll = asyncio.create_task(metrics_module._poll_queue(Store(), metrics))  # type: ignore[arg-type]
    try:
        await until_async(lambda: registry.get_sample_value("chorus_queue_depth") == 2)
    finally:
        poll.cancel()
