"""The daemon's own Prometheus series, read off the event log as it is written:
jobs, turns, tokens and cost per body and model, failovers, body crashes, policy
denials, and the queue's depth. They share the gateway's registry, so the one
``/metrics`` endpoint shows both.

Nothing here is on a job's path: a task follows every session live and counts
what it sees; it never slows a body down (a subscriber that falls behind is
dropped by the bus, and this one re-subscribes).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable

import prometheus_client
from prometheus_client import CollectorRegistry

from chorus.events import (
    ErrorCode,
    Event,
    Handoff,
    JobEnded,
    Notice,
    PermissionDecision,
    SessionEnded,
    SessionStarted,
    TurnCompleted,
    UsageUpdate,
)
from chorus.store import JobState, SlowSubscriberError, Store, StoreError

log = logging.getLogger("chorus.daemon.metrics")
QUEUE_POLL_S = 2.0


class DaemonMetrics:
    """Counters fed by :meth:`observe`, one event at a time."""

    def __init__(self, registry: CollectorRegistry) -> None:
        def counter(name: str, help_text: str, *labels: str) -> prometheus_client.Counter:
            return prometheus_client.Counter(name, help_text, labels, registry=registry)

        self.jobs = counter(
            "chorus_jobs_total", "Jobs ended, by body and end state.", "body", "state"
        )
        self.turns = counter("chorus_turns_total", "Completed turns.", "body", "model")
        self.tokens = counter(
            "chorus_tokens_total", "Tokens of completed turns.", "body", "model", "kind"
        )
        self.cost = counter(
            "chorus_cost_usd_total", "Cost the bodies reported, USD.", "body", "model"
        )
        self.failovers = counter(
            "chorus_failovers_total", "Jobs handed to another body.", "from_body", "to_body"
        )
        self.crashes = counter("chorus_body_crashes_total", "Bodies that died mid-job.", "body")
        self.denials = counter(
            "chorus_policy_denials_total", "Tool calls the policy denied.", "body"
        )
        self.queue_depth = prometheus_client.Gauge(
            "chorus_queue_depth", "Jobs waiting to start.", registry=registry
        )
        self._models: dict[str, str] = {}  # session -> the model it last announced

    def observe(self, event: Event) -> None:
        body = event.body or "unknown"
        match event:
            case SessionStarted() | UsageUpdate() if event.model:
                self._models[event.session_id] = event.model
            case TurnCompleted():
                self._turn(body, self._models.get(event.session_id, "default"), event)
            case SessionEnded():  # its body is gone: a restart announces its model again
                self._models.pop(event.session_id, None)
            case JobEnded():
                self.jobs.labels(body, event.state).inc()
                if event.error is not None and event.error.code == ErrorCode.BODY_CRASHED:
                    self.crashes.labels(body).inc()
            case Notice() if event.kind == "recovery":
                self.crashes.labels(body).inc()  # died, and was resumed natively
            case Handoff():
                self.failovers.labels(event.from_body, event.to_body).inc()
            case PermissionDecision() if event.decision == "deny":
                self.denials.labels(body).inc()

    def _turn(self, body: str, model: str, turn: TurnCompleted) -> None:
        self.turns.labels(body, model).inc()
        if turn.usage is not None:
            self.tokens.labels(body, model, "input").inc(turn.usage.input_tokens)
            self.tokens.labels(body, model, "output").inc(turn.usage.output_tokens)
            self.tokens.labels(body, model, "cached_input").inc(turn.usage.cached_input_tokens)
        if turn.cost_usd:
            self.cost.labels(body, model).inc(turn.cost_usd)


Observer = Callable[[Event], None]


@contextlib.asynccontextmanager
async def following(store: Store, metrics: DaemonMetrics, *others: Observer) -> AsyncIterator[None]:
    """Count the log's events (and poll the queue) while the block runs; ``others``
    see every event too (the budget ledger, the structured log)."""
    observers = [metrics.observe, *others]
    tasks = [
        asyncio.create_task(_follow(store, observers), name="metrics-events"),
        asyncio.create_task(_poll_queue(store, metrics), name="metrics-queue"),
    ]
    try:
        yield
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def _follow(store: Store, observers: list[Observer]) -> None:
    while True:
        try:
            async with await store.subscribe(None) as sub:
                async for event in sub:
                    for observe in observers:
                        _safely(observe, event)
            return  # the store closed
        except SlowSubscriberError:
            log.warning("metrics fell behind the log; following again from now")


def _safely(observe: Observer, event: Event) -> None:
    try:
        observe(event)
    except Exception:  # one observer's bug must not stop the others
        log.exception("an event observer failed")


async def _poll_queue(store: Store, metrics: DaemonMetrics) -> None:
    """The queue's depth every :data:`QUEUE_POLL_S`; a read the store fails (a shared
    database away) leaves the last depth and is tried again at the next poll."""
    while True:
        try:
            queued = await store.list_jobs(state=JobState.QUEUED)
        except StoreError as exc:
            log.debug("queue depth not read: %s", exc)
        else:
            metrics.queue_depth.set(len(queued))
        await asyncio.sleep(QUEUE_POLL_S)
