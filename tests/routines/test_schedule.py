"""Next-fire math with a fixed clock: cron across DST in two timezones, intervals,
one-shots, catch-up and concurrency policies, active hours."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from chorus.routines._schedule import (
    ActiveHours,
    At,
    Cron,
    Every,
    admit,
    due_firings,
    next_fire,
    plan_catch_up,
)

BERLIN = ZoneInfo("Europe/Berlin")
NEW_YORK = ZoneInfo("America/New_York")


def utc(*parts: int) -> float:
    return datetime(*parts, tzinfo=UTC).timestamp()


def fires(cron: Cron, start: float, count: int) -> list[float]:
    out: list[float] = []
    t = start
    for _ in range(count):
        nxt = next_fire(cron, t, anchor=0)
        assert nxt is not None
        out.append(nxt)
        t = nxt
    return out


def test_daily_9am_keeps_local_time_across_spring_forward_in_berlin() -> None:
    cron = Cron("0 9 * * *", BERLIN)
    got = fires(cron, utc(2026, 3, 27, 12), 3)
    # 09:00 CET = 08:00 UTC, then 09:00 CEST = 07:00 UTC from the 29th.
    assert got == [utc(2026, 3, 28, 8), utc(2026, 3, 29, 7), utc(2026, 3, 30, 7)]


def test_a_skipped_wall_time_fires_once_right_after_the_gap_in_berlin() -> None:
    cron = Cron("30 2 * * *", BERLIN)
    got = fires(cron, utc(2026, 3, 28, 12), 2)
    # 02:30 does not exist on 29 March: it runs at 03:00 CEST (01:00 UTC), once.
    assert got == [utc(2026, 3, 29, 1), utc(2026, 3, 30, 0, 30)]


def test_a_repeated_wall_time_fires_once_at_its_first_pass_in_berlin() -> None:
    cron = Cron("30 2 * * *", BERLIN)
    got = fires(cron, utc(2026, 10, 24, 12), 2)
    # 02:30 happens twice on 25 October (CEST then CET): only the first counts.
    assert got == [utc(2026, 10, 25, 0, 30), utc(2026, 10, 26, 1, 30)]


def test_next_fire_from_inside_the_repeated_hour_does_not_go_back_in_new_york() -> None:
    cron = Cron("30 1 * * *", NEW_YORK)
    # 06:10 UTC is 01:10 EST, the second pass of 01:xx on 1 November.
    assert next_fire(cron, utc(2026, 11, 1, 6, 10), anchor=0) == utc(2026, 11, 2, 6, 30)
    # from before the first pass it is 01:30 EDT = 05:30 UTC
    assert next_fire(cron, utc(2026, 11, 1, 4), anchor=0) == utc(2026, 11, 1, 5, 30)


def test_hourly_over_the_fall_back_day_in_new_york_is_ordered_and_unique() -> None:
    cron = Cron("0 * * * *", NEW_YORK)
    due, more = due_firings(cron, utc(2026, 11, 1, 4), utc(2026, 11, 2, 5), anchor=0, limit=100)
    assert not more
    assert due == sorted(set(due))
    # 25 real hours; the repeated 01:00 fires once.
    assert len(due) == 24
    assert utc(2026, 11, 1, 5) in due  # 01:00 EDT
    assert utc(2026, 11, 1, 6) not in due  # 01:00 EST, the repeat


def test_half_hourly_across_spring_forward_in_new_york_collapses_the_gap() -> None:
    cron = Cron("*/30 * * * *", NEW_YORK)
    due, _ = due_firings(cron, utc(2026, 3, 8, 6), utc(2026, 3, 8, 8), anchor=0, limit=100)
    # 01:30 EST (06:30), then 02:00 and 02:30 (absent) fold into 03:00 EDT (07:00),
    # then 03:30 and 04:00 EDT.
    expected = [utc(2026, 3, 8, 6, 30), utc(2026, 3, 8, 7), utc(2026, 3, 8, 7, 30)]
    assert due == [*expected, utc(2026, 3, 8, 8)]


def test_due_firings_agree_with_next_fire_over_a_dst_week() -> None:
    for tz in (BERLIN, NEW_YORK):
        cron = Cron("15 */3 * * *", tz)
        start, end = utc(2026, 10, 22), utc(2026, 11, 4)
        due, more = due_firings(cron, start, end, anchor=0, limit=1000)
        assert not more
        walked = [t for t in fires(cron, start, len(due) + 1) if t <= end]
        assert due == walked


def test_due_firings_keep_only_the_latest_up_to_the_limit() -> None:
    cron = Cron("0 * * * *", BERLIN)
    due, more = due_firings(cron, utc(2026, 1, 1), utc(2026, 1, 2), anchor=0, limit=3)
    assert more
    assert due == [utc(2026, 1, 1, 22), utc(2026, 1, 1, 23), utc(2026, 1, 2)]


def test_intervals_count_from_the_anchor() -> None:
    every = Every(600)
    assert next_fire(every, 1000.0, anchor=1000.0) == 1600.0
    assert next_fire(every, 1599.0, anchor=1000.0) == 1600.0
    assert next_fire(every, 1600.0, anchor=1000.0) == 2200.0
    due, more = due_firings(every, 1000.0, 4000.0, anchor=1000.0, limit=2)
    assert (due, more) == ([3400.0, 4000.0], True)


def test_a_one_shot_fires_once() -> None:
    at = At(5000.0)
    assert next_fire(at, 100.0, anchor=0) == 5000.0
    assert next_fire(at, 5000.0, anchor=0) is None
    assert due_firings(at, 100.0, 6000.0, anchor=0, limit=5) == ([5000.0], False)
    assert due_firings(at, 5000.0, 6000.0, anchor=0, limit=5) == ([], False)


@pytest.mark.parametrize("policy", ["skip_missed", "run_latest_once", "enqueue_missed"])
def test_an_on_time_firing_fires_under_every_catch_up_policy(policy: str) -> None:
    plan = plan_catch_up(policy, [100.0], 101.0, grace_s=10, cap=3, on_time_s=60)  # type: ignore[arg-type]
    assert plan.fire == [100.0]
    assert plan.missed == []


def test_skip_missed_fires_nothing_and_records_the_latest() -> None:
    plan = plan_catch_up("skip_missed", [100.0, 200.0], 250.0, grace_s=1e6, cap=3, on_time_s=60)
    assert (plan.fire, plan.missed) == ([], [200.0])


def test_run_latest_once_fires_the_latest_within_the_grace_window_only() -> None:
    due = [100.0, 200.0, 300.0]
    inside = plan_catch_up("run_latest_once", due, 1000.0, grace_s=800, cap=3, on_time_s=60)
    assert (inside.fire, inside.missed) == ([300.0], [])
    late = plan_catch_up("run_latest_once", due, 1200.0, grace_s=800, cap=3, on_time_s=60)
    assert (late.fire, late.missed) == ([], [300.0])
    # a single firing an hour late is a catch-up too, not "on time"
    one = plan_catch_up("run_latest_once", [300.0], 5000.0, grace_s=800, cap=3, on_time_s=60)
    assert (one.fire, one.missed) == ([], [300.0])


def test_enqueue_missed_fires_the_latest_ones_up_to_the_cap() -> None:
    due = [100.0, 200.0, 300.0, 400.0]
    plan = plan_catch_up("enqueue_missed", due, 5000.0, grace_s=1, cap=2, on_time_s=60)
    assert (plan.fire, plan.missed) == ([300.0, 400.0], [])
    none = plan_catch_up("enqueue_missed", due, 5000.0, grace_s=1, cap=0, on_time_s=60)
    assert (none.fire, none.missed) == ([], [400.0])


def test_concurrency_policies() -> None:
    assert admit("coalesce_if_active", running=0, queued=0) == "enqueue"
    assert admit("coalesce_if_active", running=1, queued=0) == "enqueue"
    assert admit("coalesce_if_active", running=1, queued=1) == "coalesce"
    assert admit("skip_if_active", running=1, queued=0) == "skip"
    assert admit("skip_if_active", running=0, queued=1) == "skip"
    assert admit("skip_if_active", running=0, queued=0) == "enqueue"
    assert admit("always_enqueue", running=3, queued=4) == "enqueue"


def test_active_hours_in_the_routines_timezone_and_across_midnight() -> None:
    day = ActiveHours.parse("09:00-18:00")
    assert day.contains(utc(2026, 6, 1, 7), BERLIN)  # 09:00 CEST
    assert not day.contains(utc(2026, 6, 1, 6, 59), BERLIN)
    assert not day.contains(utc(2026, 6, 1, 16), BERLIN)  # 18:00 CEST
    night = ActiveHours.parse("22:00-06:00")
    assert night.contains(utc(2026, 1, 1, 3), NEW_YORK)  # 22:00 EST
    assert night.contains(utc(2026, 1, 1, 10), NEW_YORK)  # 05:00 EST
    assert not night.contains(utc(2026, 1, 1, 12), NEW_YORK)
    with pytest.raises(ValueError, match="HH:MM"):
        ActiveHours.parse("9-17")
