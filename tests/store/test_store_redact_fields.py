"""every stored field goes through redaction, on both backends.

An opaque secret (no known key format: only registering it makes it a secret)
is written into every text field of jobs, routines, firings, worktrees, control
requests, flags and team mailboxes; then every row of every table is read raw, as an outside
process would, and the secret must be nowhere.
"""

from __future__ import annotations

import asyncio
import dataclasses

from chorus.events import TurnCompleted
from chorus.store import Firing, JobState, NewMessage, Store, WorktreeRecord
from tests.store.conftest import db_rows

SECRET = "".join(["opq", "Rk7", "Wm2", "Zt9", "Lx4"])
MARK = "[REDACTED:secret]"

_TABLES = {
    "SELECT name FROM sqlite_master WHERE type = 'table'",
    "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()",
}


def _worktree(job_id: str) -> WorktreeRecord:
    return WorktreeRecord(
        job_id=job_id,
        repo=f"/repos/{SECRET}",
        path=f"/wt/{SECRET}/{job_id}",
        branch=f"chorus/{SECRET}",
        base=f"release-{SECRET}",
        base_commit="a" * 40,
        into=f"main-{SECRET}",
        state="ready",
        created_at=0.0,
        updated_at=0.0,
        info={"note": SECRET},
    )


async def _write_every_kind(store: Store) -> str:
    session = await store.create_session(
        "testbody", model=f"m-{SECRET}", cwd=f"/work/{SECRET}", native_session_id=SECRET
    )
    options = {"model": f"m-{SECRET}", "cwd": f"/w/{SECRET}", "labels": [SECRET]}
    job = await store.create_job(f"fix {SECRET}", body=f"b-{SECRET}", options=options)
    await store.claim_next_job()
    await store.update_job(
        job.id,
        session_id=session.id,
        body=f"other-{SECRET}",
        prompt=f"again {SECRET}",
        result={"text": f"done {SECRET}"},
        error={"message": f"failed {SECRET}"},
    )
    await store.end_job(
        job.id, JobState.FAILED, TurnCompleted(), error={"message": f"end {SECRET}"}
    )
    name = f"nightly-{SECRET}"
    await store.register_routine(name)
    await store.set_routine_enabled(name, False)
    firing = Firing(name, 1000.0, kind="file_change", detail={"paths": [f"/x/{SECRET}"]})
    await store.create_fired_job(firing, f"routine {SECRET}", body=f"b-{SECRET}")
    await store.record_firing(dataclasses.replace(firing, scheduled_for=2000.0), "skipped")
    await store.create_worktree(_worktree(job.id))
    await store.update_worktree(job.id, state="merged", info={"tip": SECRET})
    await store.record_control_request(session.id, "r1", f"sub-{SECRET}", {"c": SECRET})
    await _flags_and_mail(store, job.id)
    return job.id


async def _flags_and_mail(store: Store, job_id: str) -> None:
    options = [f"yes-{SECRET}", "no"]
    flag = await store.create_flag(
        f"ok {SECRET}?", default="no", options=options, deadline_at=9e9, job_id=job_id
    )
    await store.decide_flag(
        flag.id, "approved", choice=f"yes-{SECRET}", reason=SECRET, decided_by=f"by-{SECRET}"
    )
    await store.mark_flag_delivered(flag.id, f"steer-{SECRET}")
    team, member = f"team-{SECRET}", f"member-{SECRET}"
    await store.set_team_members(team, [member, "lead"])
    await store.post_message(
        NewMessage("m1", team, "lead", member, "task", {"t": SECRET}, correlation_id=SECRET)
    )


def _raw_dump(store: Store) -> str:
    """Every row of every table of the store's database, as text."""
    tables: list[str] = []
    for query in _TABLES:
        try:
            tables = [row[0] for row in db_rows(store, query)]
        except Exception:  # the other backend's catalogue
            continue
        break
    assert "jobs" in tables, tables
    return "\n".join(repr(db_rows(store, f"SELECT * FROM {t}")) for t in sorted(tables))


async def test_no_stored_field_keeps_a_registered_secret(store: Store) -> None:
    store.redactor.add_secret(SECRET)
    await _write_every_kind(store)
    dump = await asyncio.to_thread(_raw_dump, store)
    assert SECRET not in dump
    carriers = ("b-", "other-", "nightly-", "/repos/", "chorus/", "release-", "sub-", "yes-")
    for carried in (*carriers, "by-", "steer-", "team-", "member-"):
        assert carried + MARK in dump, carried  # the field was written, redacted


async def test_redacted_records_are_found_again_by_their_original_names(store: Store) -> None:
    store.redactor.add_secret(SECRET)
    job_id = await _write_every_kind(store)
    job = await store.get_job(job_id)
    assert (job.body, job.prompt) == (f"other-{MARK}", f"again {MARK}")
    found = await store.list_worktrees(repo=f"/repos/{SECRET}")
    assert [w.job_id for w in found] == [job_id]
    assert found[0].path == f"/wt/{MARK}/{job_id}"
    firings = await store.list_firings(f"nightly-{SECRET}")
    assert len(firings) == 2
    routines = await store.list_routine_records()
    assert [(r.name, r.enabled) for r in routines] == [(f"nightly-{MARK}", False)]
    await store.delete_routine(f"nightly-{SECRET}")
    assert await store.list_routine_records() == []
    team, member = f"team-{SECRET}", f"member-{SECRET}"
    assert sorted(await store.team_members(team)) == ["lead", f"member-{MARK}"]
    taken = await store.take_messages(team, member, job_id=job_id)
    assert [(m.id, m.team, m.recipient) for m in taken] == [
        ("m1", f"team-{MARK}", f"member-{MARK}")
    ]
    assert [m.id for m in await store.list_messages(team, recipient=member)] == ["m1"]
