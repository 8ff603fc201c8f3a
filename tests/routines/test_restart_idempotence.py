"""Exactly once across crashes: a scheduler process is SIGKILLed at random moments
while an every-minute routine fires ~10 times a second (a fast clock), and
restarted. Afterwards every scheduled time has one firing, every queued firing one
job, and no job lacks its firing."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from chorus.routines import routines_dir
from chorus.store import Redactor, SqliteStore

SCRIPT = Path(__file__).parent / "scripts" / "fire_loop.py"
#: Kills in the suite (at least; more until the routine fired past 20 times, which
#: a loaded machine's slower ticks need).
ROUNDS = 2
#: Kills in the soak (``-m slow``, ``bench/bench_stress.py``); more with CHORUS_SOAK_ROUNDS.
SOAK_ROUNDS = int(os.environ.get("CHORUS_SOAK_ROUNDS", "8"))


async def _run_then_kill(home: Path, started: float, after_s: float) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(SCRIPT),
        str(started),
        env={**os.environ, "CHORUS_HOME": str(home)},
        stdout=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None
    first = await proc.stdout.readline()  # it is ticking
    assert first, "the scheduler process exited on its own"
    await asyncio.sleep(after_s)
    proc.send_signal(signal.SIGKILL)
    await proc.stdout.read()
    await proc.wait()


async def _fired() -> int:
    async with SqliteStore(redactor=Redactor()) as store:
        return len(await store.list_firings("fast"))


async def test_sigkill_around_firings_never_fires_twice_or_loses_one(
    chorus_home: Path, claude_installed: None
) -> None:
    await _kill_around_firings(chorus_home, ROUNDS)


@pytest.mark.slow
async def test_many_sigkills_around_firings_never_fire_twice_or_lose_one(
    chorus_home: Path, claude_installed: None
) -> None:
    await _kill_around_firings(chorus_home, SOAK_ROUNDS)


async def _kill_around_firings(chorus_home: Path, rounds: int) -> None:
    (routines_dir() / "fast.toml").write_text(
        '[routine]\nevery = "1m"\nmodel_preference = "claude"\n'
        'catch_up = "enqueue_missed"\ncatch_up_cap = 100\nconcurrency = "always_enqueue"\n'
        '[routine.task]\nprompt = "tick"\n'
    )
    (chorus_home / "config.toml").write_text("[routines]\nheartbeat = false\n")
    started = time.time()
    rng = random.Random(19)
    kills = 0
    while kills < rounds or (kills < 10 * rounds and await _fired() <= 20):
        await _run_then_kill(chorus_home, started, rng.uniform(0.05, 0.6))
        kills += 1
    async with SqliteStore(redactor=Redactor()) as store:
        firings = await store.list_firings("fast")
        jobs = [j for j in await store.list_jobs() if j.options.get("routine") == "fast"]
        (record,) = await store.list_routine_records()
    times = sorted(f.scheduled_for for f in firings)
    print(f"{len(times)} firings over {kills} kills")
    assert len(times) > 20, "the routine fired often enough to be killed around firings"
    # every minute from the anchor to the last firing, each exactly once
    expected = [round(record.anchor_at + 60 * k, 3) for k in range(1, len(times) + 1)]
    assert times == expected
    assert all(f.outcome == "queued" for f in firings)
    assert sorted(f.job_id for f in firings) == sorted(j.id for j in jobs)
    per_time = Counter(j.options["scheduled_for"] for j in jobs)
    assert set(per_time.values()) == {1}
