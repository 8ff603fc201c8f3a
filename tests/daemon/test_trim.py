"""Giving the allocator's free memory back once the daemon is idle after jobs."""

from __future__ import annotations

import asyncio

from chorus.daemon._trim import IdleTrim, libc_trim


async def test_a_spell_of_jobs_trims_once_after_the_last_ends() -> None:
    trims: list[int] = []
    idle = IdleTrim(lambda: False, lambda: trims.append(1), delay_s=0.05)
    for _ in range(200):  # a spell of job ends: one timer pending, re-armed each time
        idle.note()
    assert not trims
    await asyncio.sleep(0.3)
    assert trims == [1]
    await asyncio.sleep(0.2)  # idle on: no second trim without a new job
    assert idle.trims == 1


async def test_no_trim_while_a_session_is_busy_until_its_job_ends() -> None:
    busy = [True]
    trims: list[int] = []
    idle = IdleTrim(lambda: busy[0], lambda: trims.append(1), delay_s=0.05)
    idle.note()
    await asyncio.sleep(0.3)
    assert not trims
    busy[0] = False
    idle.note()  # the busy session's job ended
    await asyncio.sleep(0.3)
    assert trims == [1]


def test_glibc_trim_runs_here() -> None:
    trim = libc_trim()
    assert trim is not None  # Linux with glibc, as CI
    assert trim() in (0, 1)  # 1: memory was released, 0: none could be
