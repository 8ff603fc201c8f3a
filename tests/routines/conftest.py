"""A real store and a real supervisor whose queue is never worked (jobs stay queued
unless a test moves them), and a scheduler on a clock the test sets."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from chorus._errors import AgentNotFoundError
from chorus.agents import find_agent
from chorus.config import load_config
from chorus.daemon import Supervisor
from chorus.routines import Scheduler, routines_dir
from chorus.store import Redactor, SqliteStore


def write_routine(name: str, text: str) -> Path:
    path = routines_dir() / f"{name}.toml"
    path.write_text(text)
    return path


@dataclass
class Clock:
    now: float

    def __call__(self) -> float:
        return self.now


@dataclass
class Rig:
    store: SqliteStore
    sup: Supervisor
    clock: Clock
    sched: Scheduler

    def restart(self) -> Scheduler:
        """A new scheduler on the same store: what a restarted daemon builds."""
        self.sched = Scheduler(self.sup, clock=self.clock)
        return self.sched


def _claude_or_skip() -> None:
    """Jobs are submitted for the claude body, so its CLI must be installed (as in the
    root conftest: required under CHORUS_REQUIRE_AGENTS=1)."""
    try:
        find_agent("claude")
    except AgentNotFoundError as exc:
        if os.environ.get("CHORUS_REQUIRE_AGENTS") == "1":
            pytest.fail(f"claude CLI not installed: {exc}")
        pytest.skip(f"claude CLI not installed: {exc}")


@pytest.fixture
def claude_installed() -> None:
    _claude_or_skip()


@pytest.fixture
async def rig(chorus_home: Path, claude_installed: None) -> AsyncIterator[Rig]:
    async with SqliteStore(redactor=Redactor()) as store:
        sup = Supervisor(store, load_config())
        clock = Clock(0.0)
        yield Rig(store, sup, clock, Scheduler(sup, clock=clock))
