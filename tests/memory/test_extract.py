"""Extraction at job end: parsing the model's items, dedup, supersede, and when it runs."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from pathlib import Path

import pytest

from chorus.config import ChorusConfig
from chorus.events import JobEnded, MemoryChanged, Text, TextDelta
from chorus.memory import (
    EXTRACTION_TIMEOUT_S,
    Extractions,
    Memory,
    extract_job,
    extraction_prompt,
    memory_settings,
    parse_items,
    talk_of,
)
from chorus.store import JobRecord, SqliteStore, Store


def test_parse_items_reads_a_fenced_array_and_warns_about_bad_elements() -> None:
    reply = (
        "Here you go:\n```json\n"
        '[{"kind": "preference", "text": "Prefers pnpm", "importance": 0.8},'
        ' {"kind": "opinion", "text": "nope"}, {"kind": "fact"}, "junk",'
        ' {"kind": "fact", "text": "Ships on Fridays", "importance": 7, "supersedes": "m1"}]\n```'
    )
    items, warnings = parse_items(reply)
    assert [(i.kind, i.text, i.importance, i.supersedes) for i in items] == [
        ("preference", "Prefers pnpm", 0.8, None),
        ("fact", "Ships on Fridays", 0.5, "m1"),
    ]
    assert len(warnings) == 3
    assert parse_items("no array here")[1][0].startswith("extraction reply holds no JSON array")
    assert parse_items("[not json]")[1][0].startswith("extraction reply is not valid JSON")


async def _job_with_talk(store: Store, state: str = "succeeded") -> tuple[JobRecord, JobEnded]:
    session = await store.create_session("claude", state="active")
    job = await store.create_job(
        "From now on use pnpm, not npm.", body="claude", session_id=session.id
    )
    other = await store.create_job("unrelated", body="claude", session_id=session.id)
    await store.append(session.id, TextDelta(text="Sure", job_id=job.id))
    await store.append(session.id, Text(text="Sure, pnpm from now on.", job_id=job.id))
    await store.append(session.id, Text(text="OTHER JOB TEXT", job_id=other.id))
    ended = await store.append(session.id, JobEnded(state=state, job_id=job.id))
    assert isinstance(ended, JobEnded)
    return job, ended


async def test_talk_is_the_jobs_prompt_and_final_texts_only(chorus_home: Path) -> None:
    async with SqliteStore() as store:
        job, _ = await _job_with_talk(store)
        talk = talk_of(job, await store.read_events(job.session_id or ""))
    assert talk == "USER: From now on use pnpm, not npm.\n\nASSISTANT: Sure, pnpm from now on."


def _config(**memory: object) -> ChorusConfig:
    return ChorusConfig(memory={"extraction": True, **memory})


async def test_extraction_adds_dedups_and_supersedes(chorus_home: Path) -> None:
    with Memory() as mem:
        old = mem.add("The project uses npm", "decision").item
        same = mem.add("Deploys happen on Fridays", "fact").item
    prompts: list[tuple[str, str]] = []
    asked: list[tuple[str | None, float]] = []

    async def model(body: str, prompt: str, *, model: str | None, **limits: float) -> str:
        prompts.append((body, prompt))
        asked.append((model, limits["timeout"]))
        return json.dumps(
            [
                {
                    "kind": "decision",
                    "text": "The project uses pnpm, not npm",
                    "supersedes": old.id,
                },
                {"kind": "fact", "text": "deploys happen on fridays"},
                {
                    "kind": "preference",
                    "text": "Likes short answers",
                    "supersedes": "m404404404404",
                },
            ]
        )

    async with SqliteStore() as store:
        job, ended = await _job_with_talk(store)
        changes = await extract_job(job, ended, store, _config(), run=model)
        read = await store.read_events(job.session_id or "")
        logged = [e for e in read if isinstance(e, MemoryChanged)]
    assert [c.op for c in changes] == ["add", "supersede", "reinforce", "add"]
    assert [e.op for e in logged] == ["add", "supersede", "reinforce", "add"]
    body, prompt = prompts[0]
    assert body == "claude-print"  # the one-shot mode of the job's body
    assert asked == [(None, EXTRACTION_TIMEOUT_S)]  # [memory] extraction_model: unset
    assert f"- [decision] The project uses npm (memory {old.id})" in prompt  # known, with ids
    assert "OTHER JOB TEXT" not in prompt
    with Memory() as mem:
        assert mem.get(old.id).status == "superseded"
        assert mem.get(same.id).reinforcement == 2
        new = next(i for i in mem.items() if i.text == "The project uses pnpm, not npm")
        assert new.source_kind == "extraction"
        assert new.supersedes == old.id
        # Who wrote it: the job it was extracted from, its body and session.
        assert (new.job_id, new.body, new.session_id) == (job.id, "claude", job.session_id)
        liked = next(i for i in mem.items() if i.kind == "preference")
        assert liked.supersedes is None  # an unknown id is not a supersede


@pytest.mark.parametrize(
    ("state", "memory", "runs"),
    [
        ("failed", {}, False),
        ("failed", {"extract_failed": True}, True),
        ("succeeded", {"extraction": False}, False),
        ("cancelled", {"extract_failed": True}, False),
    ],
)
async def test_when_extraction_runs(
    chorus_home: Path, state: str, memory: dict[str, object], runs: bool
) -> None:
    called: list[str] = []

    async def model(body: str, prompt: str, **_: object) -> str:
        called.append(prompt)
        return "[]"

    async with SqliteStore() as store:
        job, ended = await _job_with_talk(store, state)
        await extract_job(job, ended, store, _config(**memory), run=model)
    assert bool(called) is runs


def test_the_prompt_asks_for_json_and_lists_known_items() -> None:
    prompt = extraction_prompt("USER: hi", [])
    assert "Answer with a JSON array and nothing else" in prompt
    assert "Known items:\n(none)" in prompt


def test_extraction_is_on_by_default_and_the_env_only_fills_a_silent_config(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("CHORUS_MEMORY_EXTRACTION")
    assert memory_settings({}).extraction is True
    assert memory_settings({"extraction": False}).extraction is False
    monkeypatch.setenv("CHORUS_MEMORY_EXTRACTION", "0")
    assert memory_settings({}).extraction is False
    assert memory_settings({"extraction": True}).extraction is True


async def test_the_hook_does_not_wait_for_the_run_and_drain_does(
    chorus_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CHORUS_MEMORY_EXTRACTION")
    release = asyncio.Event()

    async def slow_model(body: str, prompt: str, **_: object) -> str:
        await release.wait()
        return json.dumps([{"kind": "preference", "text": "The user wants pnpm"}])

    async with SqliteStore() as store:
        job, ended = await _job_with_talk(store)
        runs = Extractions(store, ChorusConfig(), run=slow_model)
        await asyncio.wait_for(runs.hook(job, ended), 1.0)  # returns at once
        assert len(runs) == 1
        with Memory() as mem:
            assert mem.items() == []  # the run is still under way
        release.set()
        await runs.drain()
        assert len(runs) == 0
    with Memory() as mem:
        assert [i.text for i in mem.items()] == ["The user wants pnpm"]


async def test_drain_cancels_a_run_that_outlasts_its_patience(chorus_home: Path) -> None:
    async def stuck_model(body: str, prompt: str, **_: object) -> str:
        await asyncio.Event().wait()
        return "[]"

    async with SqliteStore() as store:
        job, ended = await _job_with_talk(store)
        runs = Extractions(store, _config(), run=stuck_model)
        await runs.hook(job, ended)
        await runs.drain(patience=0.2)
        assert len(runs) == 0


async def test_a_frameworks_child_job_is_not_extracted(chorus_home: Path) -> None:
    async with SqliteStore() as store:
        job, ended = await _job_with_talk(store)
        child = replace(job, options={**job.options, "system": True})
        called: list[str] = []

        async def model(body: str, prompt: str, **_: object) -> str:
            called.append(prompt)
            return "[]"

        runs = Extractions(store, _config(), run=model)
        await runs.hook(child, ended)
        assert len(runs) == 0
        await runs.hook(job, ended)  # the job itself is
        await runs.drain()
    assert len(called) == 1
