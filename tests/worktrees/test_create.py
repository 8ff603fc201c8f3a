"""Planning and creating job worktrees on a real repository; bad input leaves nothing."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from chorus.config import WorktreeConfig, chorus_home
from chorus.worktrees import (
    BranchInUseError,
    Created,
    DetachedHeadError,
    NotARepositoryError,
    SetupFailedError,
    UnknownRefError,
    WorktreeError,
    branch_for,
    create,
    plan,
    slug,
)

if TYPE_CHECKING:
    from conftest import Git

JOB = "0123456789abcdef0123456789abcdef"


def listed(git: Git, repo: Path) -> str:
    return git(repo, "worktree", "list", "--porcelain")


def nothing_made(git: Git, repo: Path, before: str) -> None:
    assert listed(git, repo) == before
    assert git(repo, "branch", "--list", "chorus/*") == ""
    assert not (chorus_home() / "worktrees").exists()


def test_slug_and_branch_name() -> None:
    assert slug("Fix the Login bug!\nand more") == "fix-the-login-bug"
    assert slug("   ") == "task"
    assert branch_for(JOB, "Add a README") == "chorus/01234567-add-a-readme"


def test_a_worktree_from_head_on_its_own_branch(repo: Path, git: Git) -> None:
    spec = plan(repo, JOB, "add a file", WorktreeConfig())
    assert create(spec, WorktreeConfig()) == Created(copied=[], notes=[])
    assert spec.path.parent.parent == (chorus_home() / "worktrees").resolve()
    assert spec.path.name == JOB
    assert (spec.branch, spec.base, spec.into) == ("chorus/01234567-add-a-file", "main", "main")
    assert git(spec.path, "rev-parse", "--abbrev-ref", "HEAD") == spec.branch
    assert spec.base_commit == git(repo, "rev-parse", "HEAD")
    assert (spec.path / "README").read_text() == "hello\n"
    assert git(repo, "rev-parse", "--abbrev-ref", "HEAD") == "main"  # main checkout untouched


def test_given_branch_and_base(repo: Path, git: Git) -> None:
    git(repo, "branch", "develop")
    git(repo, "tag", "v1")
    spec = plan(repo, JOB, "x", WorktreeConfig(), branch="feature/mine", base="develop")
    assert (spec.branch, spec.base, spec.into) == ("feature/mine", "develop", "develop")
    tagged = plan(repo, JOB, "x", WorktreeConfig(), base="v1")
    assert tagged.into == "main"  # a tag is no branch: merges go back to HEAD's branch


def test_configured_root_is_used(repo: Path, tmp_path: Path) -> None:
    config = WorktreeConfig(root=str(tmp_path / "trees"))
    spec = plan(repo, JOB, "x", config)
    create(spec, config)
    assert spec.path.parent.parent == (tmp_path / "trees").resolve()
    assert spec.path.is_dir()


def test_not_a_repository_is_refused(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(NotARepositoryError, match="not inside a git repository"):
        plan(plain, JOB, "x", WorktreeConfig())
    assert not (chorus_home() / "worktrees").exists()


def test_detached_head_needs_a_branch_base(repo: Path, git: Git) -> None:
    before = listed(git, repo)
    git(repo, "checkout", "-q", "--detach")
    with pytest.raises(DetachedHeadError, match="pass --base BRANCH"):
        plan(repo, JOB, "x", WorktreeConfig())
    with pytest.raises(DetachedHeadError, match="not a local branch"):
        plan(repo, JOB, "x", WorktreeConfig(), base="HEAD")
    spec = plan(repo, JOB, "x", WorktreeConfig(), base="main")
    assert spec.into == "main"
    assert "detached" in listed(git, repo)
    assert before.split("\n")[0] == listed(git, repo).split("\n")[0]


def test_branch_in_use_names_where(repo: Path, git: Git) -> None:
    before = listed(git, repo)
    with pytest.raises(BranchInUseError, match=f"checked out at {repo}"):
        plan(repo, JOB, "x", WorktreeConfig(), branch="main")
    nothing_made(git, repo, before)


def test_bad_branch_name_and_unknown_base(repo: Path, git: Git) -> None:
    before = listed(git, repo)
    with pytest.raises(WorktreeError, match="not a valid git branch name"):
        plan(repo, JOB, "x", WorktreeConfig(), branch="no..dots")
    with pytest.raises(UnknownRefError, match="nosuch"):
        plan(repo, JOB, "x", WorktreeConfig(), base="nosuch")
    nothing_made(git, repo, before)


def test_dirty_main_checkout_starts_from_the_last_commit_and_says_so(repo: Path) -> None:
    (repo / "README").write_text("edited, not committed\n")
    spec = plan(repo, JOB, "x", WorktreeConfig())
    create(spec, WorktreeConfig())
    assert (spec.path / "README").read_text() == "hello\n"
    assert "1 uncommitted change(s)" in spec.warnings[0]
    assert "without them" in spec.warnings[0]
    assert (repo / "README").read_text() == "edited, not committed\n"


def test_untracked_files_are_copied_and_setup_runs(repo: Path) -> None:
    (repo / ".env").write_text("TOKEN=1\n")
    (repo / ".env.local").write_text("LOCAL=1\n")
    config = WorktreeConfig(copy_files=[".env*"], setup="echo ready > setup.out")
    spec = plan(repo, JOB, "x", config)
    made = create(spec, config)
    assert (spec.path / ".env").read_text() == "TOKEN=1\n"
    assert (spec.path / ".env.local").read_text() == "LOCAL=1\n"
    assert (spec.path / "setup.out").read_text() == "ready\n"
    assert made.copied == [".env", ".env.local"]
    assert made.notes == ["copied .env, .env.local", "setup 'echo ready > setup.out' ok"]


def test_failing_setup_undoes_everything(repo: Path, git: Git) -> None:
    before = listed(git, repo)
    config = WorktreeConfig(setup="echo broken >&2; exit 3")
    spec = plan(repo, JOB, "x", config)
    with pytest.raises(SetupFailedError, match=r"exit 3.*broken"):
        create(spec, config)
    assert not spec.path.exists()
    assert listed(git, repo) == before
    assert git(repo, "branch", "--list", "chorus/*") == ""


def test_worktree_settings_load_from_config_toml(tmp_path: Path) -> None:
    from chorus.config import load_config

    path = tmp_path / "config.toml"
    path.write_text(
        '[daemon]\nworktree = "auto"\n'
        '[worktree]\nroot = "~/trees"\ncopy = [".env*"]\nsetup = "make deps"\n'
    )
    config = load_config(path)
    assert config.daemon.worktree == "auto"
    assert (config.worktree.copy_files, config.worktree.setup) == ([".env*"], "make deps")
    path.write_text('[daemon]\nworktree = "sometimes"\n')
    with pytest.raises(Exception, match="worktree"):
        load_config(path)
