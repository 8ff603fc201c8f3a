"""The framework runner over a recording port: reflect fails closed on a review it
cannot read, and consensus hands the executor the plan once."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from chorus.events import Event, TurnCompleted, TurnFailed
from chorus.frameworks import Settings, consensus, reflect
from chorus.store import JobRecord, JobState


def _job(prompt: str = "write notes.txt") -> JobRecord:
    now = time.time()
    return JobRecord(id="j1", prompt=prompt, state=JobState.RUNNING, created_at=now, updated_at=now)


@dataclass
class Port:
    """A port whose children answer with the texts given per body."""

    answers: dict[str, str]
    elapsed: dict[str, float] = field(default_factory=dict)
    turns: list[str] = field(default_factory=list)
    notes: list[tuple[str, str]] = field(default_factory=list)

    async def turn(self, job: JobRecord, prompt: str, plan: str | None = None) -> Event:
        self.turns.append(prompt)
        return TurnCompleted(result=f"turn {len(self.turns)} done")

    async def child(self, job: JobRecord, prompt: str, body: str, mode: str) -> JobRecord:
        start = 100.0
        return replace(
            _job(prompt),
            id=f"c-{body}",
            state=JobState.SUCCEEDED,
            result={"text": self.answers[body]},
            started_at=start,
            ended_at=start + self.elapsed.get(body, 1.0),
        )

    async def note(self, job: JobRecord, message: str, kind: str) -> None:
        self.notes.append((kind, message))

    def healthy(self, bodies: Sequence[str]) -> list[str]:
        return list(bodies)

    async def changes(self, job: JobRecord) -> str:
        return ""

    async def cost(self, record: JobRecord) -> float | None:
        return None


async def test_a_review_that_is_not_json_fails_the_review_step_with_its_text_kept() -> None:
    port = Port({"codex": "Looks great to me, ship it."})
    final = await reflect(port, _job(), Settings(planners=(), reviewer="codex"))
    assert isinstance(final, TurnFailed)
    assert "could not be read" in final.error.message
    assert len(port.turns) == 1  # no revision was made from a review nobody could read
    reviews = [m for k, m in port.notes if k == "review"]
    assert len(reviews) == 1
    assert "Looks great to me, ship it." in reviews[0]


async def test_consensus_of_two_takes_the_faster_plan_and_passes_free_text_once() -> None:
    port = Port(
        {"claude": '{"steps": ["write notes.txt"]}', "codex": "1. Create notes.txt"},
        elapsed={"claude": 5.0, "codex": 2.0},
    )
    await consensus(port, _job(), Settings(planners=("claude", "codex")))
    arbiter = [m for k, m in port.notes if k == "arbiter"]
    assert arbiter[0].startswith("arbiter chose claude's plan")  # structured beats free text
    assert port.turns[-1].count("write notes.txt") == 2  # the task, then the plan's step
    port2 = Port(
        {"claude": '{"steps": ["write notes.txt"]}', "codex": '{"steps": ["make notes"]}'},
        elapsed={"claude": 5.0, "codex": 2.0},
    )
    await consensus(port2, _job(), Settings(planners=("claude", "codex")))
    assert "codex's plan: the fastest planner (2.0s)" in port2.notes[-1][1]
