"""A body in a git worktree may write what a commit there needs of the main
repository, never its config, hooks or the worktree's pointers; a ``.git`` file the
body forged adds nothing."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from chorus.policy import Policy
from chorus.sandbox import bwrap_path, layout, write_wrapper
from chorus.sandbox._git import git_paths
from tests._repo import git, make_repo


@pytest.fixture
def worktree(tmp_path: Path) -> Path:
    """A repository with one commit in ``repo``, and a worktree of it in ``wt``."""
    repo = tmp_path / "repo"
    repo.mkdir()
    make_repo(repo)
    git(repo, "worktree", "add", "-q", "-b", "job", str(tmp_path / "wt"))
    return tmp_path / "wt"


def test_a_worktree_writes_objects_refs_logs_and_its_own_folder(
    worktree: Path, tmp_path: Path
) -> None:
    main = (tmp_path / "repo" / ".git").resolve()
    found = git_paths(worktree)
    assert found.writable == (
        main / "objects",
        main / "refs",
        main / "logs",
        main / "worktrees" / "wt",
    )
    assert found.read_only == (
        main / "worktrees" / "wt" / "commondir",
        main / "worktrees" / "wt" / "gitdir",
        main / "worktrees" / "wt" / "config.worktree",  # created empty to be held
    )
    assert (main / "worktrees" / "wt" / "config.worktree").read_text() == ""
    assert found.common == (main,)
    assert main not in found.writable


@pytest.mark.parametrize("target", ["home", "other"])
def test_a_forged_git_file_adds_nothing(worktree: Path, tmp_path: Path, target: str) -> None:
    """The ``.git`` file is in the body's folder: one pointing at the home, or at
    another repository's worktree (whose record names another folder), is ignored."""
    (tmp_path / "home" / "worktrees" / "x").mkdir(parents=True)
    other = tmp_path / "repo" / ".git" / "worktrees" / "wt"
    aimed = tmp_path / "home" / "worktrees" / "x" if target == "home" else other
    forged = tmp_path / "forged"
    forged.mkdir()
    (forged / ".git").write_text(f"gitdir: {aimed}\n")
    assert git_paths(forged).writable == ()


def test_a_plain_folder_or_repository_adds_nothing(tmp_path: Path) -> None:
    assert git_paths(tmp_path).writable == ()
    git(tmp_path, "init", "-q")
    assert git_paths(tmp_path).writable == ()
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / ".git").write_bytes(b"gitdir: \xff\n")
    assert git_paths(tmp_path / "sub").writable == ()


@pytest.mark.skipif(bwrap_path() is None, reason="bubblewrap is not installed")
def test_a_commit_in_the_worktree_works_but_the_repository_config_and_hooks_hold(
    worktree: Path, tmp_path: Path
) -> None:
    main = tmp_path / "repo" / ".git"
    config = (main / "config").read_text()
    box = layout(Policy(), worktree, {"HOME": str(tmp_path / "home")}, tmp_path / "ch")
    wrapper = write_wrapper(tmp_path / "w.sh", str(bwrap_path()), box, Path("/bin/sh"))
    script = (
        "echo new > new.txt && git add new.txt && git commit -q -m second && echo COMMITTED; "
        f"git config core.hooksPath {tmp_path}; "
        f"git config --file {main}/config core.fsmonitor 'touch {tmp_path}/ran'; "
        f"echo 'touch {tmp_path}/ran' > {main}/hooks/post-commit; "
        f"echo '* filter=x' > {main}/info/attributes; "
        f"echo 'gitdir: {tmp_path}' > {main}/worktrees/wt/gitdir; "
        f"echo {tmp_path} > {main}/worktrees/wt/commondir; "
        f"printf '[core]\\n\\tfsmonitor = touch {tmp_path}/ran\\n'"
        f" > {main}/worktrees/wt/config.worktree"
    )
    done = subprocess.run(
        [str(wrapper), "-c", script], capture_output=True, text=True, cwd=worktree
    )
    assert "COMMITTED" in done.stdout, done.stderr
    assert git(tmp_path / "repo", "log", "--format=%s", "job") == "second\nfirst"
    assert (main / "config").read_text() == config
    assert not (main / "hooks" / "post-commit").exists()
    assert not (main / "info" / "attributes").exists()
    assert (main / "worktrees" / "wt" / "commondir").read_text() == "../..\n"
    assert (main / "worktrees" / "wt" / "gitdir").read_text() == f"{worktree}/.git\n"
    assert (main / "worktrees" / "wt" / "config.worktree").read_text() == ""
    assert done.stderr.count("Read-only file system") >= 5, done.stderr
    # CONTROL: with the worktree's own config on, that plant would run on a plain
    # `git status` there.
    git(tmp_path / "repo", "config", "extensions.worktreeConfig", "true")
    plant = f"[core]\n\tfsmonitor = touch {tmp_path}/ran\n"
    (main / "worktrees" / "wt" / "config.worktree").write_text(plant)
    git(worktree, "status", "--porcelain")
    assert (tmp_path / "ran").exists()
