"""The bus: live delivery after commit, catch-up from any seq, slow subscribers."""

from __future__ import annotations

import asyncio
import random

import pytest

from chorus.events import Event, Text
from chorus.store import (
    SessionRecord,
    SlowSubscriberError,
    Store,
    Subscription,
)
from tests.store.conftest import MakeStore, db_rows


def text(i: int) -> Text:
    return Text(text=f"text {i}")


async def collect(sub: Subscription, until_seq: int) -> list[int]:
    """Seqs delivered by ``sub`` up to and including ``until_seq``."""
    seqs: list[int] = []
    async for event in sub:
        seqs.append(event.seq)
        if event.seq >= until_seq:
            break
    return seqs


async def wait_until_caught_up(sub: Subscription) -> asyncio.Task[Event]:
    """Start waiting for the next event and return once the log is read."""
    task = asyncio.create_task(anext(sub))
    while not sub.caught_up:  # noqa: ASYNC110 (a state to poll, no event to wait on)
        await asyncio.sleep(0.005)
    return task


async def test_live_events_arrive_after_they_are_durable(
    store: Store, session: SessionRecord
) -> None:
    async with await store.subscribe(session.id) as sub:
        first = await wait_until_caught_up(sub)
        await store.append_many(session.id, [text(i) for i in range(10)])
        delivered = [await first] + [await anext(sub) for _ in range(9)]
    assert [e.seq for e in delivered] == list(range(1, 11))
    query = f"SELECT seq FROM events WHERE session_id = '{session.id}'"
    on_disk = {row[0] for row in await asyncio.to_thread(db_rows, store, query)}
    assert {e.seq for e in delivered} <= on_disk


async def test_catch_up_under_concurrent_appends_has_no_gap_and_no_duplicate(
    store: Store, session: SessionRecord
) -> None:
    rng = random.Random(7)
    await store.append_many(session.id, [text(i) for i in range(700)])
    total = 700 + 3000

    async def writer() -> None:
        written = 700
        while written < total:
            size = min(rng.randint(1, 40), total - written)
            burst = [store.append(session.id, text(written + k)) for k in range(size)]
            await asyncio.gather(*burst)
            written += size
            await asyncio.sleep(0)

    async def follower(from_seq: int, delay: float) -> list[int]:
        await asyncio.sleep(delay)
        async with await store.subscribe(session.id, from_seq=from_seq) as sub:
            return await collect(sub, total)

    starts = [(1, 0.0), (350, 0.01), (1, 0.05), (2000, 0.02), (1, 0.1)]
    results = await asyncio.gather(writer(), *(follower(f, d) for f, d in starts))
    for (from_seq, _), seqs in zip(starts, results[1:], strict=True):
        assert seqs == list(range(from_seq, total + 1))


async def test_overflow_while_catching_up_rereads_the_log(
    store: Store, session: SessionRecord
) -> None:
    await store.append_many(session.id, [text(i) for i in range(1000)])
    sub = await store.subscribe(session.id, from_seq=1, max_queue=10)
    # Not iterated yet: these 100 live events overflow its 10-event buffer.
    await store.append_many(session.id, [text(i) for i in range(100)])
    async with sub:
        assert await collect(sub, 1100) == list(range(1, 1101))


async def test_a_slow_live_subscriber_is_dropped_and_can_resume(
    store: Store, session: SessionRecord
) -> None:
    sub = await store.subscribe(session.id, max_queue=10)
    first = await wait_until_caught_up(sub)
    await store.append(session.id, text(0))
    assert (await first).seq == 1
    await store.append_many(session.id, [text(i) for i in range(1, 51)])  # 50 > 10 buffered
    with pytest.raises(SlowSubscriberError) as caught:
        await anext(sub)
    assert (caught.value.last_seq, caught.value.limit) == (1, 10)
    # The stated policy: resubscribe from last_seq + 1; nothing is lost.
    async with await store.subscribe(session.id, from_seq=caught.value.last_seq + 1) as again:
        assert await collect(again, 51) == list(range(2, 52))


async def test_all_sessions_subscription_sees_commit_order(store: Store) -> None:
    a = (await store.create_session("x", session_id="a")).id
    b = (await store.create_session("y", session_id="b")).id
    async with await store.subscribe(None) as sub:
        await store.append(a, text(1))
        await store.append(b, text(2))
        await store.append(a, text(3))
        got = [await anext(sub) for _ in range(3)]
    assert [(e.session_id, e.seq) for e in got] == [("a", 1), ("b", 1), ("a", 2)]


async def test_closing_the_store_ends_subscriptions(make_store: MakeStore) -> None:
    store = make_store()
    await store.start()
    sid = (await store.create_session("x")).id
    sub = await store.subscribe(sid, from_seq=1)
    await store.append(sid, text(1))
    pending = asyncio.create_task(collect(sub, 10**9))
    await asyncio.sleep(0.05)
    await store.close()
    assert await pending == [1]
