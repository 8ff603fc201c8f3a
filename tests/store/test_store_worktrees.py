"""The worktrees table: insert, read back, list by repository, update, errors."""

from __future__ import annotations

import pytest

from chorus.store import (
    DuplicateRecordError,
    Store,
    UnknownWorktreeError,
    WorktreeRecord,
)


def record(job_id: str, repo: str = "/repos/a", path: str | None = None) -> WorktreeRecord:
    return WorktreeRecord(
        job_id=job_id,
        repo=repo,
        path=path or f"/wt/{job_id}",
        branch=f"chorus/{job_id}-x",
        base="main",
        base_commit="a" * 40,
        into="main",
        state="ready",
        created_at=0.0,
        updated_at=0.0,
        info={"copied": [".env"]},
    )


async def test_a_worktree_record_round_trips(store: Store) -> None:
    made = await store.create_worktree(record("j1"))
    assert made.created_at > 0
    assert made.updated_at == made.created_at
    got = await store.get_worktree("j1")
    assert got == made
    assert (got.branch, got.into, got.info) == ("chorus/j1-x", "main", {"copied": [".env"]})


async def test_worktrees_list_oldest_first_and_by_repo(store: Store) -> None:
    for job, repo in (("j1", "/r/a"), ("j2", "/r/b"), ("j3", "/r/a")):
        await store.create_worktree(record(job, repo))
    assert [w.job_id for w in await store.list_worktrees()] == ["j1", "j2", "j3"]
    assert [w.job_id for w in await store.list_worktrees(repo="/r/a")] == ["j1", "j3"]


async def test_update_changes_only_what_is_given(store: Store) -> None:
    await store.create_worktree(record("j1"))
    moved = await store.update_worktree("j1", state="locked")
    assert (moved.state, moved.info) == ("locked", {"copied": [".env"]})
    noted = await store.update_worktree("j1", info={"merged_tip": "b" * 40})
    assert (noted.state, noted.info) == ("locked", {"merged_tip": "b" * 40})


async def test_a_second_record_for_a_job_or_a_path_is_refused(store: Store) -> None:
    await store.create_worktree(record("j1"))
    with pytest.raises(DuplicateRecordError):
        await store.create_worktree(record("j1", path="/elsewhere"))
    with pytest.raises(DuplicateRecordError):
        await store.create_worktree(record("j2", path="/wt/j1"))
    assert [w.job_id for w in await store.list_worktrees()] == ["j1"]


async def test_unknown_worktrees_raise(store: Store) -> None:
    with pytest.raises(UnknownWorktreeError):
        await store.get_worktree("nope")
    with pytest.raises(UnknownWorktreeError):
        await store.update_worktree("nope", state="ready")
