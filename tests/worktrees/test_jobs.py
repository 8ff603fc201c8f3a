"""The supervisor's worktree hooks and the user's operations, on a real store and
real repositories (the body is left out: the end-to-end tests drive a real CLI)."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from chorus.config import ChorusConfig, DaemonConfig, WorktreeConfig
from chorus.events import TurnFailed, Worktree
from chorus.store import JobRecord, Redactor, SqliteStore
from chorus.worktrees import (
    NotARepositoryError,
    UnmergedWorkError,
    finish_job_worktree,
    list_all,
    merge,
    prepare_job_worktree,
    prune,
    remove,
    report_orphans,
    start_job_worktree,
)

if TYPE_CHECKING:
    from conftest import Git


@dataclass(frozen=True)
class Ask:
    prompt: str
    cwd: str | None
    session_id: str | None = None
    worktree: bool | None = True
    branch: str | None = None
    base: str | None = None


@pytest.fixture
async def store(chorus_home: Path) -> AsyncIterator[SqliteStore]:
    async with SqliteStore(redactor=Redactor()) as opened:
        yield opened


CONFIG = ChorusConfig()


async def submit(store: SqliteStore, ask: Ask, config: ChorusConfig = CONFIG) -> JobRecord:
    """What the supervisor's submit does around the hook."""
    async with prepare_job_worktree(store, config, ask) as prepared:
        sid = ask.session_id or (await store.create_session("claude", cwd=prepared.cwd)).id
        return await store.create_job(
            ask.prompt, session_id=sid, job_id=prepared.job_id, options=prepared.options
        )


async def actions(store: SqliteStore, job: JobRecord) -> list[str]:
    events = await store.read_events(job.session_id or "")
    return [e.action for e in events if isinstance(e, Worktree)]


async def test_a_job_runs_locked_in_its_worktree_and_its_leftovers_are_committed(
    store: SqliteStore, repo: Path, git: Git
) -> None:
    job = await submit(store, Ask("write notes\nin detail", str(repo)))
    session = await store.get_session(job.session_id or "")
    rec = await store.get_worktree(job.id)
    assert session.cwd == rec.path
    assert job.options == {"worktree": job.id}
    assert await start_job_worktree(store, job) is None
    assert (await store.get_worktree(job.id)).state == "locked"
    assert "\nlocked chorus job" in git(repo, "worktree", "list", "--porcelain")
    (Path(rec.path) / "notes.txt").write_text("notes\n")  # what a body would leave
    await finish_job_worktree(store, job)
    assert git(Path(rec.path), "log", "--format=%s", "-1") == "write notes"
    assert git(repo, "log", "--format=%s", "-1", "main") == "first"
    assert (await store.get_worktree(job.id)).state == "ready"
    assert "\nlocked" not in git(repo, "worktree", "list", "--porcelain")
    assert await actions(store, job) == ["created", "locked", "committed", "unlocked"]


async def test_a_failure_inside_submit_removes_the_new_worktree(
    store: SqliteStore, repo: Path, git: Git
) -> None:
    seen: list[Path] = []

    async def failing_submit() -> None:
        async with prepare_job_worktree(store, CONFIG, Ask("x", str(repo))) as prepared:
            seen.append(Path(prepared.cwd or ""))
            assert seen[0].is_dir()
            raise RuntimeError("session creation failed")

    with pytest.raises(RuntimeError):
        await failing_submit()
    made = seen[0]
    assert not made.exists()
    assert git(repo, "branch", "--list", "chorus/*") == ""
    assert [w.state for w in await store.list_worktrees()] == ["removed"]


async def test_bad_input_writes_nothing(store: SqliteStore, tmp_path: Path) -> None:
    with pytest.raises(NotARepositoryError):
        await submit(store, Ask("x", str(tmp_path)))
    assert await store.list_worktrees() == []
    assert await store.list_sessions() == []


async def test_auto_mode_runs_in_place_outside_a_repository(
    store: SqliteStore, repo: Path, tmp_path: Path
) -> None:
    auto = ChorusConfig(daemon=DaemonConfig(worktree="auto"))
    outside = await submit(store, Ask("x", str(tmp_path), worktree=None), auto)
    assert outside.options == {}
    inside = await submit(store, Ask("y", str(repo), worktree=None), auto)
    assert inside.options == {"worktree": inside.id}
    opted_out = await submit(store, Ask("z", str(repo), worktree=False), auto)
    assert opted_out.options == {}


async def test_a_follow_up_job_of_the_session_uses_the_same_worktree(
    store: SqliteStore, repo: Path
) -> None:
    first = await submit(store, Ask("first", str(repo)))
    second = await submit(store, Ask("second", None, session_id=first.session_id, worktree=None))
    assert second.options == {"worktree": first.id}


async def test_a_deleted_worktree_refuses_the_queued_job(store: SqliteStore, repo: Path) -> None:
    job = await submit(store, Ask("x", str(repo)))
    rec = await store.get_worktree(job.id)
    shutil.rmtree(rec.path)
    refused = await start_job_worktree(store, job)
    assert isinstance(refused, TurnFailed)
    assert f"the worktree {rec.path} is gone" in refused.error.message
    assert (await store.get_worktree(job.id)).state == "missing"
    assert await actions(store, job) == ["refused"]
    await finish_job_worktree(store, job)  # nothing to commit, nothing raised
    assert await actions(store, job) == ["refused"]


async def test_merge_rm_prune_and_the_listing(store: SqliteStore, repo: Path, git: Git) -> None:
    one = await submit(store, Ask("one", str(repo)))
    two = await submit(store, Ask("two", str(repo)))
    for job, name in ((one, "one.txt"), (two, "two.txt")):
        await start_job_worktree(store, job)
        (Path((await store.get_worktree(job.id)).path) / name).write_text(name)
        await finish_job_worktree(store, job)
    listing = {row["job_id"]: row for row in await list_all(store)}
    assert (listing[one.id]["ahead"], listing[one.id]["dirty"]) == (1, 0)
    await merge(store, one.id[:10])
    assert (repo / "one.txt").read_text() == "one.txt"
    with pytest.raises(UnmergedWorkError, match="two"):
        await remove(store, two.id)
    pruned = await prune(store)
    assert pruned["removed"] == [one.id]
    assert [k["job_id"] for k in pruned["kept"]] == [two.id]
    assert "merged" in await actions(store, one)
    assert (await store.get_worktree(two.id)).state == "ready"


async def test_orphans_are_reported_never_deleted(store: SqliteStore, repo: Path, git: Git) -> None:
    gone = await submit(store, Ask("gone", str(repo)))
    shutil.rmtree((await store.get_worktree(gone.id)).path)
    stray = await submit(store, Ask("stray", str(repo)))
    stray_rec = await store.get_worktree(stray.id)
    await store.update_worktree(stray.id, state="removed")  # as if its record were lost
    found = await report_orphans(store, CONFIG)
    assert any(gone.id in line and "is gone" in line for line in found)
    assert any(stray_rec.path in line and "no Chorus record" in line for line in found)
    assert Path(stray_rec.path).is_dir()
    assert git(repo, "branch", "--list", (await store.get_worktree(gone.id)).branch) != ""
    assert (await store.get_worktree(gone.id)).state == "missing"


async def test_the_created_event_says_a_dirty_checkout_was_left_out(
    store: SqliteStore, repo: Path
) -> None:
    (repo / "README").write_text("not committed\n")
    job = await submit(store, Ask("x", str(repo)))
    await start_job_worktree(store, job)
    events = [e for e in await store.read_events(job.session_id or "") if isinstance(e, Worktree)]
    assert events[0].action == "created"
    assert "1 uncommitted change(s)" in events[0].detail
    assert "without them" in events[0].detail
    await start_job_worktree(store, job)  # a restart after a crash: announced once only
    again = [e for e in await store.read_events(job.session_id or "") if isinstance(e, Worktree)]
    assert [e.action for e in again] == ["created", "locked", "locked"]


async def test_the_guard_before_a_body_restart_refuses_a_vanished_worktree(
    store: SqliteStore, repo: Path
) -> None:
    from chorus.worktrees import guard_job_worktree

    job = await submit(store, Ask("x", str(repo)))
    assert await start_job_worktree(store, job) is None
    assert await guard_job_worktree(store, job) is None
    shutil.rmtree((await store.get_worktree(job.id)).path)
    refused = await guard_job_worktree(store, job)
    assert isinstance(refused, TurnFailed)
    assert "is gone" in refused.error.message
    assert (await store.get_worktree(job.id)).state == "missing"
    await finish_job_worktree(store, job)  # the job ends without a commit or an error


async def test_a_follow_up_after_rm_is_refused_not_run_elsewhere(
    store: SqliteStore, repo: Path
) -> None:
    first = await submit(store, Ask("first", str(repo)))
    await remove(store, first.id)
    later = await submit(store, Ask("later", None, session_id=first.session_id, worktree=None))
    assert later.options == {"worktree": first.id}
    refused = await start_job_worktree(store, later)
    assert isinstance(refused, TurnFailed)
    assert "is gone" in refused.error.message


async def test_the_orphan_report_survives_a_broken_repository(
    store: SqliteStore, repo: Path
) -> None:
    job = await submit(store, Ask("x", str(repo)))
    shutil.rmtree(repo / ".git")
    found = await report_orphans(store, CONFIG)
    assert any("cannot list its worktrees" in line for line in found)
    assert (await store.get_worktree(job.id)).state == "ready"


async def test_copied_files_are_never_committed_and_go_with_rm(
    store: SqliteStore, repo: Path, git: Git
) -> None:
    (repo / "local.cfg").write_text("secret-ish, and not ignored\n")
    config = ChorusConfig(worktree=WorktreeConfig(copy_files=["local.cfg"]))
    job = await submit(store, Ask("x", str(repo)), config)
    rec = await store.get_worktree(job.id)
    assert (Path(rec.path) / "local.cfg").is_file()
    await start_job_worktree(store, job)
    (Path(rec.path) / "work.txt").write_text("w")
    await finish_job_worktree(store, job)
    assert git(Path(rec.path), "show", "--name-only", "--format=", "HEAD") == "work.txt"
    row = (await list_all(store))[0]
    assert (row["dirty"], row["ahead"]) == (0, 1)
    await merge(store, job.id)
    assert git(repo, "ls-files", "local.cfg") == ""  # the merge did not bring it into main
    assert (repo / "work.txt").read_text() == "w"
    await remove(store, job.id)
    assert not Path(rec.path).exists()


async def test_another_hosts_worktrees_are_not_checked_here(store: SqliteStore, repo: Path) -> None:
    """On a shared store a record names a folder on the host that made it;
    a daemon on another host neither sees it nor marks it missing."""
    theirs = await submit(
        store,
        Ask("made on host a", str(repo)),
        ChorusConfig.model_validate({"store": {"host": "host-a"}}),
    )
    rec = await store.get_worktree(theirs.id)
    assert rec.info["host"] == "host-a"
    shutil.rmtree(rec.path)  # not on this host
    here = ChorusConfig.model_validate({"store": {"host": "host-b"}})
    assert await report_orphans(store, here) == []
    assert (await store.get_worktree(theirs.id)).state == "ready"
    found = await report_orphans(store, ChorusConfig.model_validate({"store": {"host": "host-a"}}))
    assert any(theirs.id in line and "is gone" in line for line in found)
