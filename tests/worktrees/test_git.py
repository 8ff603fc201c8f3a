"""Chorus's git runner executes nothing the repository names: each kind of program a
body could plant in ``.git`` (hooks, hooksPath, fsmonitor, clean/smudge filters,
external diff, textconv, diff command, pager, merge driver, gpg program, an alias,
an includeIf'd config, a submodule's own config) writes a marker when it runs.
Chorus's worktree creation, end-of-job commit, diff and merge, and reflect's diff,
run with every plant in place: no marker, and the work is still done. The CONTROL
runs plain ``git`` on the same plants: the markers appear (the plants are live)."""

from __future__ import annotations

import os
import pty
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from chorus.config import WorktreeConfig
from chorus.worktrees import GitError, MergeConflictError, autocommit, create, git_diff, plan
from chorus.worktrees import _git as git_module
from chorus.worktrees._git import inert_value, overrides, run
from chorus.worktrees._ops import diff, merge

if TYPE_CHECKING:
    from conftest import Git

JOB = "0123456789abcdef0123456789abcdef"
HOOKS = (
    "pre-commit",
    "prepare-commit-msg",
    "commit-msg",
    "post-commit",
    "post-checkout",
    "post-merge",
    "pre-merge-commit",
    "post-index-change",
    "reference-transaction",
)
#: Attributes that select the planted drivers (committed before anything is planted).
ATTRIBUTES = "*.txt filter=evil diff=conv merge=drv\n*.cfg diff=cmd\n"


class Plants:
    """Programs that each write ``markers/<kind>`` when run, planted in ``repo``."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.markers = root / "markers"
        self.markers.mkdir()

    def program(self, kind: str, *, passes_input: bool = False) -> str:
        path = self.root / f"plant-{kind}"
        tail = "cat\n" if passes_input else "exit 0\n"
        path.write_text(f"#!/bin/sh\ntouch {self.markers}/{kind}\n{tail}")
        path.chmod(0o755)
        return str(path)

    def fired(self) -> list[str]:
        return sorted(p.name for p in self.markers.iterdir())

    def clear(self) -> None:
        for marker in self.markers.iterdir():
            marker.unlink()


def sh(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Plain git: the control."""
    done = subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, text=True)
    assert done.returncode == 0 or not check, done.stderr
    return done


def with_attributes(repo: Path) -> None:
    (repo / ".gitattributes").write_text(ATTRIBUTES)
    (repo / "a.txt").write_text("a\n")
    (repo / "b.cfg").write_text("b\n")
    sh(repo, "add", "-A")
    sh(repo, "commit", "-q", "-m", "attributes")


def plant(repo: Path, plants: Plants, hooks_via: str = "hooksPath") -> None:
    """Every kind, in the repository's own config and hooks."""
    hooks = plants.root / "hooks" if hooks_via == "hooksPath" else repo / ".git" / "hooks"
    hooks.mkdir(exist_ok=True)
    for hook in HOOKS:
        (hooks / hook).write_text(f"#!/bin/sh\ntouch {plants.markers}/hook-{hook}\n")
        (hooks / hook).chmod(0o755)
    settings = {
        "core.fsmonitor": plants.program("fsmonitor"),
        "filter.evil.clean": plants.program("clean", passes_input=True),
        "filter.evil.smudge": plants.program("smudge", passes_input=True),
        "filter.evil.required": "true",
        "diff.external": plants.program("external"),
        "diff.conv.textconv": plants.program("textconv", passes_input=True),
        "diff.cmd.command": plants.program("diff-command"),
        "core.pager": plants.program("pager", passes_input=True),
        "pager.log": plants.program("pager-log", passes_input=True),
        "merge.drv.driver": plants.program("merge-driver") + " %O %A %B",
        "alias.chorus-x": "!" + plants.program("alias"),
        "commit.gpgSign": "true",
        "gpg.program": plants.program("gpg"),
        "credential.helper": plants.program("credential"),
    }
    if hooks_via == "hooksPath":
        settings["core.hooksPath"] = str(hooks)
    for key, value in settings.items():
        sh(repo, "config", key, value)


@pytest.fixture
def plants(tmp_path: Path) -> Plants:
    return Plants(tmp_path)


def worktree(repo: Path, config: WorktreeConfig | None = None):  # type: ignore[no-untyped-def]
    config = config or WorktreeConfig()
    spec = plan(repo, JOB, "planted", config)
    create(spec, config)
    return spec


# -- Chorus's git: nothing planted runs, the work is done ------------------------------


@pytest.mark.parametrize("hooks_via", ["hooksPath", ".git/hooks"])
def test_chorus_git_runs_nothing_planted_and_does_its_work(
    repo: Path, plants: Plants, hooks_via: str
) -> None:
    with_attributes(repo)
    plant(repo, plants, hooks_via)
    spec = worktree(repo)  # worktree add, checkout (smudge), post-checkout
    (spec.path / "a.txt").write_text("a\nchanged\n")
    (spec.path / "b.cfg").write_text("b\nchanged\n")
    (spec.path / "new.txt").write_text("new\n")
    made = autocommit(spec.path, "the job's work", spec.branch)  # status, add, commit
    shown = diff(spec.main, spec.branch, spec.into)
    head = merge(spec.main, spec.branch, spec.into, squash=False, message="unused")
    reflected = git_diff(repo, "HEAD~1", "--stat", "--patch")
    assert plants.fired() == []
    # ... and each operation did its job.
    assert made is not None
    assert made[1] == 3
    assert sh(spec.path, "log", "--format=%s", "-1").stdout.strip() == "the job's work"
    assert sh(repo, "cat-file", "-p", f"{spec.branch}:a.txt").stdout == "a\nchanged\n"
    assert "+changed" in shown
    assert "new.txt" in shown
    assert head == sh(repo, "rev-parse", "--short", "HEAD").stdout.strip() == made[0]
    assert (repo / "a.txt").read_text() == "a\nchanged\n"
    assert "+changed" in reflected
    assert "3 files changed" in reflected


@pytest.mark.parametrize("hooks_via", ["hooksPath", ".git/hooks"])
def test_control_plain_git_runs_the_plants(repo: Path, plants: Plants, hooks_via: str) -> None:
    with_attributes(repo)
    plant(repo, plants, hooks_via)
    tree = repo.parent / "plain-tree"
    sh(repo, "worktree", "add", "-q", "-b", "plain", str(tree))
    (tree / "a.txt").write_text("a\nchanged\n")
    (tree / "b.cfg").write_text("b\nchanged\n")
    sh(tree, "add", "-A")
    assert sh(tree, "commit", "-q", "-m", "work", check=False).returncode  # gpg: no signature
    sh(tree, "-c", "commit.gpgSign=false", "commit", "-q", "-m", "work")
    hooks = {f"hook-{h}" for h in ("post-checkout", "pre-commit", "commit-msg", "post-commit")}
    assert hooks | {"hook-reference-transaction", "fsmonitor", "clean", "smudge", "gpg"} <= set(
        plants.fired()
    )
    assert "external" in _fired_by(plants, repo, "diff", "main", "plain")
    assert "textconv" in _fired_by(plants, repo, "diff", "--no-ext-diff", "main", "plain")
    assert "diff-command" in _fired_by(plants, repo, "diff", "main", "plain", "--", "b.cfg")
    assert "hook-post-merge" in _fired_by(plants, repo, "merge", "-q", "plain")


def _fired_by(plants: Plants, repo: Path, *args: str) -> list[str]:
    plants.clear()
    sh(repo, *args, check=False)
    return plants.fired()


def test_a_merge_driver_is_never_run_the_file_conflicts_instead(
    repo: Path, plants: Plants, git: Git
) -> None:
    with_attributes(repo)
    plant(repo, plants)
    spec = worktree(repo)
    (spec.path / "a.txt").write_text("a\nfrom the job\n")
    autocommit(spec.path, "job side", spec.branch)
    (repo / "a.txt").write_text("main side\na\n")  # both changed it: the driver's turn
    quiet = ("-c", "core.hooksPath=/dev/null", "-c", "commit.gpgSign=false")
    sh(repo, *quiet, "commit", "-qam", "main side")
    plants.clear()
    before = git(repo, "rev-parse", "HEAD")
    with pytest.raises(MergeConflictError, match=r"a\.txt \(the repository configures merge"):
        merge(spec.main, spec.branch, spec.into, squash=False, message="unused")
    assert plants.fired() == []
    assert git(repo, "rev-parse", "HEAD") == before  # aborted: as it was
    assert (repo / "a.txt").read_text() == "main side\na\n"
    # CONTROL: plain git runs the driver on the same merge.
    sh(repo, "merge", "--no-edit", spec.branch, check=False)
    assert "merge-driver" in plants.fired()


def test_an_alias_is_never_reached(repo: Path, plants: Plants) -> None:
    plant(repo, plants)
    with pytest.raises(ValueError, match="does not run `git chorus-x`"):
        run(repo, "chorus-x")
    assert plants.fired() == []
    sh(repo, "chorus-x", check=False)  # CONTROL
    assert "alias" in plants.fired()


_RUN = subprocess.run


def _on_a_terminal(argv: list[str], **kw: Any) -> subprocess.CompletedProcess[str]:
    """``subprocess.run`` with stdout on a terminal, where git would start a pager
    (but the runner's listing of the config, which must be read)."""
    if "--list" in argv:
        return _RUN(argv, **kw)
    kw.pop("capture_output", None)
    primary, secondary = pty.openpty()
    try:
        done = _RUN(argv, stdout=secondary, stderr=subprocess.PIPE, **kw)
    finally:
        os.close(secondary)
        os.close(primary)
    return subprocess.CompletedProcess(argv, done.returncode, "", done.stderr)


def test_no_pager_even_on_a_terminal(
    repo: Path, plants: Plants, monkeypatch: pytest.MonkeyPatch
) -> None:
    plant(repo, plants)
    monkeypatch.setattr(git_module.subprocess, "run", _on_a_terminal)
    run(repo, "log", "-1")
    run(repo, "diff", "HEAD")
    assert plants.fired() == []
    _on_a_terminal(["git", "-C", str(repo), "log", "-1"], text=True)  # CONTROL
    assert "pager-log" in plants.fired()


def test_an_included_config_of_the_new_branch_is_seen_at_checkout(
    repo: Path, plants: Plants, git: Git
) -> None:
    """``includeIf "onbranch:chorus/**"`` applies only inside the new worktree: its
    checkout is listed and run there, so its smudge filter is overridden too."""
    with_attributes(repo)
    included = plants.root / "included.cfg"
    smudge, fsmonitor = plants.program("smudge", passes_input=True), plants.program("fsmonitor")
    included.write_text(
        f'[filter "evil"]\n\tsmudge = {smudge}\n[core]\n\tfsmonitor = {fsmonitor}\n'
    )
    git(repo, "config", "includeIf.onbranch:chorus/**.path", str(included))
    spec = worktree(repo)
    assert plants.fired() == []
    assert (spec.path / "a.txt").read_text() == "a\n"
    sh(repo, "worktree", "add", "-q", "-b", "chorus/plain", str(repo.parent / "plain"))
    assert "smudge" in plants.fired()  # CONTROL


def test_a_submodules_own_config_runs_nothing(repo: Path, plants: Plants, git: Git) -> None:
    lib = repo.parent / "lib"
    lib.mkdir()
    git(lib, "init", "-q", "-b", "main")
    (lib / "x").write_text("x\n")
    git(lib, "add", "x")
    git(lib, "-c", "user.name=a", "-c", "user.email=b", "commit", "-q", "-m", "x")
    git(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(lib), "lib")
    git(repo, "commit", "-q", "-m", "with a submodule")
    git(repo / "lib", "config", "core.fsmonitor", plants.program("sub-fsmonitor"))
    (repo / "lib" / "x").write_text("x\ny\n")
    assert run(repo, "status", "--porcelain").stdout == ""
    assert git_diff(repo, "HEAD") == ""
    assert plants.fired() == []
    sh(repo, "status", "--porcelain")  # CONTROL
    assert "sub-fsmonitor" in plants.fired()


def test_the_inert_programs_are_never_found_in_the_repository(
    repo: Path, plants: Plants, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The merge driver's inert ``false`` is looked up in absolute folders only: a
    PATH with an empty or relative entry would find one the repository holds."""
    with_attributes(repo)
    plant(repo, plants)
    spec = worktree(repo)
    (spec.path / "a.txt").write_text("a\nfrom the job\n")
    autocommit(spec.path, "job side", spec.branch)
    (repo / "a.txt").write_text("main side\na\n")
    sh(repo, "-c", "core.hooksPath=/dev/null", "-c", "commit.gpgSign=false", "commit", "-qam", "m")
    (repo / "false").write_text(f"#!/bin/sh\ntouch {plants.markers}/path-false\nexit 1\n")
    (repo / "false").chmod(0o755)
    plants.clear()
    monkeypatch.setenv("PATH", f":.:{os.environ['PATH']}")
    with pytest.raises(MergeConflictError):
        merge(spec.main, spec.branch, spec.into, squash=False, message="unused")
    assert plants.fired() == []


def test_chorus_git_ignores_git_variables_of_its_own_environment(
    repo: Path, plants: Plants, monkeypatch: pytest.MonkeyPatch
) -> None:
    (repo / "README").write_text("changed\n")
    monkeypatch.setenv("GIT_EXTERNAL_DIFF", plants.program("env-external"))
    monkeypatch.setenv("GIT_CONFIG_PARAMETERS", f"'core.fsmonitor={plants.program('env-fsm')}'")
    assert "+changed" in git_diff(repo, "HEAD")
    assert plants.fired() == []
    sh(repo, "diff", "HEAD")  # CONTROL
    assert {"env-external", "env-fsm"} <= set(plants.fired())


def test_config_that_cannot_be_read_runs_nothing(repo: Path) -> None:
    with (repo / ".git" / "config").open("a") as config:
        config.write("[broken\n")
    with pytest.raises(GitError, match="config"):
        run(repo, "status")
    assert run(repo, "status", check=False).returncode != 0


# -- which keys get which inert value ---------------------------------------------------


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("core.hookspath", "/dev/null"),
        ("core.fsmonitor", "false"),
        ("core.pager", "cat"),
        ("pager.log", "false"),
        ("core.editor", ":"),
        ("sequence.editor", ":"),
        ("core.sshcommand", ""),
        ("core.askpass", ""),
        ("core.gitproxy", ""),
        ("filter.Evil.clean", ""),
        ("filter.a=b.smudge", ""),
        ("filter.lfs.process", ""),
        ("filter.lfs.required", "false"),
        ("diff.external", ""),
        ("diff.x.command", ""),
        ("diff.x.textconv", "cat"),
        ("merge.x.driver", "false"),
        ("credential.helper", ""),
        ("credential.https://example.com.helper", ""),
        ("gpg.program", "false"),
        ("gpg.ssh.program", "false"),
        ("gpg.ssh.defaultkeycommand", ""),
        ("remote.origin.uploadpack", "git-upload-pack"),
        ("remote.origin.receivepack", "git-receive-pack"),
        ("protocol.ext.allow", "never"),
        ("submodule.lib.update", "none"),
    ],
)
def test_program_keys_get_an_inert_value(key: str, value: str) -> None:
    assert inert_value(key) == value


@pytest.mark.parametrize(
    "key", ["user.name", "core.excludesfile", "diff.x.xfuncname", "merge.x.name", "core.bare"]
)
def test_data_keys_are_left_alone(key: str) -> None:
    assert inert_value(key) is None


def test_overrides_keep_the_subsection_as_written() -> None:
    keys = ["filter.My.Filter.clean", "user.name", "filter.My.Filter.clean"]
    assert overrides(keys) == [("filter.My.Filter.clean", "")]


@pytest.fixture(autouse=True)
def _no_leftover_env() -> Iterator[None]:
    yield
    assert "GIT_CONFIG_COUNT" not in os.environ
