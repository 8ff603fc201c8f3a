"""Next-fire math: pure functions of a trigger, a clock reading and the routine's state.

Times are seconds since the epoch (like ``time.time()``); wall-clock rules are
applied in the routine's own timezone. Cron expressions are matched against the
*wall clock*, then mapped to an instant with two DST rules:

* a wall time the clock skips (spring forward) fires once, at the first instant
  after the gap (like Debian cron: the job is not lost, it runs late);
* a wall time the clock repeats (fall back) fires once, at its first pass.

So the mapping from wall time to instant never goes backwards, and a daily job
runs exactly once on both DST days.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal
from zoneinfo import ZoneInfo

CatchUpPolicy = Literal["skip_missed", "run_latest_once", "enqueue_missed"]
ConcurrencyPolicy = Literal["skip_if_active", "coalesce_if_active", "always_enqueue"]
Admission = Literal["enqueue", "skip", "coalesce"]

#: Larger than any DST shift: wall-clock searches start this far to each side.
_DST_MARGIN = timedelta(hours=3)
_MINUTE = timedelta(minutes=1)


@dataclass(frozen=True, slots=True)
class Cron:
    expr: str
    tz: ZoneInfo


@dataclass(frozen=True, slots=True)
class Every:
    """Every ``seconds``, counted from the routine's anchor (when it was first loaded)."""

    seconds: float


@dataclass(frozen=True, slots=True)
class At:
    """Once, at ``when``."""

    when: float


Schedule = Cron | Every | At


# -- wall clock <-> instants ---------------------------------------------------------


def _exists(naive: datetime, tz: ZoneInfo) -> bool:
    aware = naive.replace(tzinfo=tz)
    return aware.astimezone(UTC).astimezone(tz).replace(tzinfo=None) == naive


def wall_to_instant(naive: datetime, tz: ZoneInfo) -> float:
    """The instant a wall-clock time fires at (see the module's DST rules)."""
    probe = naive
    while not _exists(probe, tz):  # inside a gap: walk to its end (a few hours at most)
        probe = probe.replace(second=0, microsecond=0) + _MINUTE
    return probe.replace(tzinfo=tz, fold=0).timestamp()


def instant_to_wall(t: float, tz: ZoneInfo) -> datetime:
    return datetime.fromtimestamp(t, tz).replace(tzinfo=None)


# -- the next firing and the missed ones ----------------------------------------------


def next_fire(schedule: Schedule, after: float, *, anchor: float) -> float | None:
    """The first firing strictly after ``after`` (None: the schedule is over)."""
    if isinstance(schedule, At):
        return schedule.when if schedule.when > after else None
    if isinstance(schedule, Every):
        steps = max(0, int((after - anchor) // schedule.seconds) + 1)
        return anchor + steps * schedule.seconds
    return _cron_next(schedule, after)


def _cron_next(cron: Cron, after: float) -> float:
    from croniter import croniter  # here: it costs the daemon's start

    it = croniter(cron.expr, instant_to_wall(after, cron.tz) - _DST_MARGIN)
    while True:
        fire = wall_to_instant(it.get_next(datetime), cron.tz)
        if fire > after:
            return fire


def due_firings(
    schedule: Schedule, after: float, now: float, *, anchor: float, limit: int
) -> tuple[list[float], bool]:
    """Firings in ``(after, now]``, oldest first, at most the ``limit`` latest; the flag
    says whether older ones were left out."""
    if isinstance(schedule, At):
        return ([schedule.when] if after < schedule.when <= now else []), False
    if isinstance(schedule, Every):
        return _every_due(schedule, after, now, anchor=anchor, limit=limit)
    return _cron_due(schedule, after, now, limit=limit)


def _every_due(
    every: Every, after: float, now: float, *, anchor: float, limit: int
) -> tuple[list[float], bool]:
    first = next_fire(every, after, anchor=anchor)
    assert first is not None
    if first > now:
        return [], False
    count = int((now - first) // every.seconds) + 1
    kept = min(count, limit)
    last = first + (count - 1) * every.seconds
    return [last - i * every.seconds for i in reversed(range(kept))], count > kept


def _cron_due(cron: Cron, after: float, now: float, *, limit: int) -> tuple[list[float], bool]:
    from croniter import croniter

    it = croniter(cron.expr, instant_to_wall(now, cron.tz) + _DST_MARGIN)
    found: list[float] = []
    while True:
        fire = wall_to_instant(it.get_prev(datetime), cron.tz)
        if fire <= after:
            return sorted(found), False
        if fire <= now and fire not in found:
            if len(found) == limit:
                return sorted(found), True
            found.append(fire)


# -- policies ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CatchUp:
    """What to do with due firings: ``fire`` them (oldest first), record ``missed``."""

    fire: list[float]
    missed: list[float]


def plan_catch_up(
    policy: CatchUpPolicy,
    due: list[float],
    now: float,
    *,
    grace_s: float,
    cap: int,
    on_time_s: float,
) -> CatchUp:
    """Decide about due firings. A lone firing no older than ``on_time_s`` is simply on
    time and fires under every policy; anything else is a catch-up:

    * ``skip_missed``: nothing fires, the latest is recorded as missed;
    * ``run_latest_once``: the latest fires if it is within ``grace_s``, else missed;
    * ``enqueue_missed``: the latest ``cap`` fire, oldest first.
    """
    if not due:
        return CatchUp([], [])
    latest = due[-1]
    if len(due) == 1 and now - latest <= on_time_s:
        return CatchUp([latest], [])
    if policy == "skip_missed":
        return CatchUp([], [latest])
    if policy == "run_latest_once":
        return CatchUp([latest], []) if now - latest <= grace_s else CatchUp([], [latest])
    kept = due[-cap:] if cap > 0 else []
    return CatchUp(kept, [] if kept else [latest])


def admit(policy: ConcurrencyPolicy, *, running: int, queued: int) -> Admission:
    """Whether a new firing of a routine with ``running``/``queued`` jobs gets a job.

    ``coalesce_if_active`` keeps at most one follow-up queued behind a running job;
    further firings fold into it.
    """
    if policy == "always_enqueue" or running + queued == 0:
        return "enqueue"
    if policy == "skip_if_active":
        return "skip"
    return "coalesce" if queued else "enqueue"


# -- active hours ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ActiveHours:
    """A daily wall-clock window ``[start, end)`` in minutes since midnight; a window
    whose end is before its start wraps past midnight (22:00-06:00)."""

    start: int
    end: int

    @classmethod
    def parse(cls, text: str) -> ActiveHours:
        """``"HH:MM-HH:MM"``; raises ValueError."""
        begin, _, finish = text.partition("-")
        return cls(_minutes(begin), _minutes(finish))

    def contains(self, t: float, tz: ZoneInfo) -> bool:
        wall = instant_to_wall(t, tz)
        minute = wall.hour * 60 + wall.minute
        if self.start <= self.end:
            return self.start <= minute < self.end
        return minute >= self.start or minute < self.end


def _minutes(text: str) -> int:
    hours, sep, minutes = text.strip().partition(":")
    if not sep or not hours.isdigit() or not minutes.isdigit():
        raise ValueError(f"expected HH:MM, got {text.strip()!r}")
    value = int(hours) * 60 + int(minutes)
    if int(minutes) >= 60 or value > 24 * 60:
        raise ValueError(f"not a time of day: {text.strip()!r}")
    return value
