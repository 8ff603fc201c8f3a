"""Guard, lock, automatic commit, status, merge and removal on real repositories."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from chorus.config import WorktreeConfig
from chorus.worktrees import (
    MergeConflictError,
    Spec,
    UnmergedWorkError,
    WorktreeError,
    WorktreeGuardError,
    autocommit,
    create,
    guard,
    plan,
    status,
)
from chorus.worktrees._ops import diff, lock, merge, remove, unlock

if TYPE_CHECKING:
    from conftest import Git

JOB = "0123456789abcdef0123456789abcdef"
OTHER = "fedcba9876543210fedcba9876543210"


def made(repo: Path, job: str = JOB, config: WorktreeConfig | None = None) -> Spec:
    config = config or WorktreeConfig()
    spec = plan(repo, job, f"job {job[:4]}", config)
    create(spec, config)
    return spec


def work(spec: Spec, name: str, text: str, git: Git) -> None:
    (spec.path / name).write_text(text)
    git(spec.path, "add", name)
    git(spec.path, "commit", "-q", "-m", f"add {name}")


def st(spec: Spec, merged_tip: str | None = None):  # type: ignore[no-untyped-def]
    return status(spec.main, spec.path, spec.branch, spec.into, merged_tip)


# -- the guard ---------------------------------------------------------------------


def test_guard_passes_on_a_live_worktree(repo: Path) -> None:
    guard(made(repo).path)


def test_guard_refuses_a_deleted_worktree(repo: Path) -> None:
    spec = made(repo)
    shutil.rmtree(spec.path)
    with pytest.raises(WorktreeGuardError, match=f"{spec.path} is gone"):
        guard(spec.path, spec.branch)


def test_guard_refuses_an_empty_folder_git_would_resolve_to_the_main_checkout(
    repo: Path, git: Git
) -> None:
    # The root inside the repository: an empty folder left there would make git
    # walk up to the main checkout, the fall-through the guard exists to stop.
    spec = made(repo, config=WorktreeConfig(root=str(repo / ".trees")))
    shutil.rmtree(spec.path)
    spec.path.mkdir()
    assert git(spec.path, "rev-parse", "--show-toplevel") == str(repo)
    with pytest.raises(WorktreeGuardError, match=f"resolves {spec.path} to {repo}"):
        guard(spec.path)
    with pytest.raises(WorktreeGuardError):
        autocommit(spec.path, "must not land on main")
    assert git(repo, "log", "--format=%s", "-1") == "first"


def test_guard_refuses_the_main_checkout_itself(repo: Path) -> None:
    with pytest.raises(WorktreeGuardError, match="not to the worktree itself"):
        guard(repo)


# -- lock and automatic commit ---------------------------------------------------------------


def test_lock_and_unlock(repo: Path, git: Git) -> None:
    spec = made(repo)
    lock(repo, spec.path, JOB)
    lock(repo, spec.path, JOB)  # a stale lock (a dead daemon's) is replaced, not an error
    assert f"locked chorus job {JOB} is running" in git(repo, "worktree", "list", "--porcelain")
    unlock(repo, spec.path)
    assert "\nlocked" not in git(repo, "worktree", "list", "--porcelain")


def test_autocommit_commits_everything_on_the_branch(repo: Path, git: Git) -> None:
    spec = made(repo)
    (spec.path / "new.txt").write_text("new\n")
    (spec.path / "README").write_text("changed\n")
    (spec.path / ".env").write_text("ignored stays out\n")
    short, files = autocommit(spec.path, "add new.txt") or ("", 0)
    assert files == 2
    assert git(spec.path, "log", "--format=%h %s", "-1") == f"{short} add new.txt"
    assert git(spec.path, "show", "--name-only", "--format=", "HEAD").split() == [
        "README",
        "new.txt",
    ]
    assert git(repo, "log", "--format=%s", "-1", "main") == "first"
    assert autocommit(spec.path, "again") is None


def test_autocommit_without_an_identity_uses_chorus(repo: Path, git: Git) -> None:
    git(repo, "config", "--unset", "user.email")
    git(repo, "config", "--unset", "user.name")
    spec = made(repo)
    (spec.path / "x").write_text("x")
    assert autocommit(spec.path, "x") is not None
    assert git(spec.path, "log", "--format=%an <%ae>", "-1") == "Chorus <chorus@localhost>"


# -- status, diff, merge -----------------------------------------------------------------------


def test_status_counts_ahead_behind_dirty_and_lists_unmerged(repo: Path, git: Git) -> None:
    spec = made(repo)
    work(spec, "a.txt", "a\n", git)
    (repo / "main.txt").write_text("m\n")
    git(repo, "add", "main.txt")
    git(repo, "commit", "-q", "-m", "on main")
    (spec.path / "dirty").write_text("d")
    got = st(spec)
    assert (got.exists, got.ahead, got.behind, got.dirty) == (True, 1, 1, 1)
    assert [c.split(" ", 1)[1] for c in got.unmerged] == ["add a.txt"]
    assert "+a" in diff(repo, spec.branch, spec.into)
    assert "main.txt" not in diff(repo, spec.branch, spec.into)


def test_merge_brings_the_branch_into_main(repo: Path, git: Git) -> None:
    spec = made(repo)
    work(spec, "a.txt", "a\n", git)
    merge(repo, spec.branch, "main", squash=False, message="unused")
    assert (repo / "a.txt").read_text() == "a\n"
    assert st(spec).unmerged == []


def test_squash_merge_is_one_commit_and_counts_as_merged(repo: Path, git: Git) -> None:
    spec = made(repo)
    work(spec, "a.txt", "a\n", git)
    work(spec, "b.txt", "b\n", git)
    merge(repo, spec.branch, "main", squash=True, message="squashed job")
    assert git(repo, "log", "--format=%s", "main") == "squashed job\nfirst"
    tip = git(repo, "rev-parse", spec.branch)
    assert len(st(spec).unmerged) == 2  # git alone does not know
    assert st(spec, merged_tip=tip).unmerged == []


@pytest.mark.parametrize("squash", [False, True])
def test_conflict_aborts_and_leaves_main_as_it_was(repo: Path, git: Git, squash: bool) -> None:
    spec = made(repo)
    work(spec, "README", "theirs\n", git)
    (repo / "README").write_text("ours\n")
    git(repo, "commit", "-qam", "ours")
    head = git(repo, "rev-parse", "HEAD")
    with pytest.raises(MergeConflictError, match=r"conflicts in README.*aborted") as caught:
        merge(repo, spec.branch, "main", squash=squash, message="m")
    assert caught.value.files == ["README"]
    assert git(repo, "rev-parse", "HEAD") == head
    assert git(repo, "status", "--porcelain") == ""
    assert (repo / "README").read_text() == "ours\n"


def test_merge_into_a_dirty_checkout_is_refused(repo: Path, git: Git) -> None:
    spec = made(repo)
    work(spec, "a.txt", "a\n", git)
    (repo / "README").write_text("uncommitted\n")
    with pytest.raises(WorktreeError, match="commit or stash"):
        merge(repo, spec.branch, "main", squash=False, message="m")
    assert not (repo / "a.txt").exists()


def test_merge_needs_the_target_checked_out(repo: Path, git: Git) -> None:
    git(repo, "branch", "develop")
    spec = plan(repo, JOB, "x", WorktreeConfig(), base="develop")
    create(spec, WorktreeConfig())
    work(spec, "a.txt", "a\n", git)
    with pytest.raises(WorktreeError, match="'develop' is not checked out anywhere"):
        merge(repo, spec.branch, "develop", squash=False, message="m")


# -- removal -----------------------------------------------------------------------------------


def test_rm_refuses_unmerged_work_and_lists_the_commits(repo: Path, git: Git) -> None:
    spec = made(repo)
    work(spec, "a.txt", "a\n", git)
    with pytest.raises(UnmergedWorkError, match=r"1 unmerged commit(?s:.*)add a.txt") as caught:
        remove(repo, spec.path, spec.branch, st(spec), force=False)
    assert len(caught.value.commits) == 1
    assert spec.path.is_dir()
    assert git(repo, "branch", "--list", spec.branch) != ""


def test_rm_refuses_uncommitted_changes(repo: Path) -> None:
    spec = made(repo)
    (spec.path / "scratch").write_text("s")
    with pytest.raises(UnmergedWorkError, match="1 uncommitted change"):
        remove(repo, spec.path, spec.branch, st(spec), force=False)


def test_rm_force_discards_and_returns_the_lost_commits(repo: Path, git: Git) -> None:
    spec = made(repo)
    work(spec, "a.txt", "a\n", git)
    lost = remove(repo, spec.path, spec.branch, st(spec), force=True)
    assert [c.split(" ", 1)[1] for c in lost] == ["add a.txt"]
    assert not spec.path.exists()
    assert git(repo, "branch", "--list", spec.branch) == ""


def test_rm_after_merge_removes_worktree_and_branch(repo: Path, git: Git) -> None:
    spec, squashed = made(repo), made(repo, OTHER)
    work(spec, "a.txt", "a\n", git)
    work(squashed, "b.txt", "b\n", git)
    merge(repo, spec.branch, "main", squash=False, message="m")
    merge(repo, squashed.branch, "main", squash=True, message="s")
    tip = git(repo, "rev-parse", squashed.branch)
    assert remove(repo, spec.path, spec.branch, st(spec), force=False) == []
    assert remove(repo, squashed.path, squashed.branch, st(squashed, tip), force=False) == []
    assert git(repo, "branch", "--list", "chorus/*") == ""
    assert git(repo, "worktree", "list").count("\n") == 0
