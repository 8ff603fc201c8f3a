"""``[worktree] copy`` copies regular files of the checkout, never a link's target
outside it: a planted ``.envrc`` link to a secret is refused and reported."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from chorus.config import WorktreeConfig
from chorus.worktrees import _copy as copy_module
from chorus.worktrees import copy_untracked, create, plan

if TYPE_CHECKING:
    from conftest import Git

JOB = "0123456789abcdef0123456789abcdef"


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    path = tmp_path / "outside" / "gateway.token"
    path.parent.mkdir()
    path.write_text("SECRET-TOKEN\n")
    return path


def made(repo: Path, *patterns: str):  # type: ignore[no-untyped-def]
    config = WorktreeConfig(copy_files=list(patterns))
    spec = plan(repo, JOB, "copy", config)
    return spec, create(spec, config)


def test_a_link_out_of_the_checkout_is_refused_and_reported(
    repo: Path, secret: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (repo / ".envrc").symlink_to(secret)
    (repo / ".env").write_text("KEEP=1\n")
    spec, created = made(repo, ".env*")
    assert not os.path.lexists(spec.path / ".envrc")
    assert (spec.path / ".env").read_text() == "KEEP=1\n"
    assert created.copied == [".env"]
    assert created.refused == [f".envrc: a link to {secret}, outside the checkout"]
    assert f"refused to copy .envrc: a link to {secret}" in created.notes[-1]
    assert "refused to copy .envrc" in caplog.text
    assert "SECRET-TOKEN" not in "".join(p.read_text() for p in spec.path.rglob(".env*"))


def test_a_link_inside_the_checkout_is_copied_as_a_file(repo: Path) -> None:
    (repo / "envs").mkdir()
    (repo / "envs" / "dev").write_text("DEV=1\n")
    (repo / ".env").symlink_to("envs/dev")
    spec, created = made(repo, ".env")
    assert created.copied == [".env"]
    assert not (spec.path / ".env").is_symlink()
    assert (spec.path / ".env").read_text() == "DEV=1\n"


def test_a_linked_folder_out_of_the_checkout_is_refused(repo: Path, secret: Path) -> None:
    (repo / "conf").symlink_to(secret.parent)
    spec, created = made(repo, "conf/*")
    assert created.copied == []
    assert created.refused == [f"conf/gateway.token: a link to {secret}, outside the checkout"]
    assert not os.path.lexists(spec.path / "conf")


def test_links_into_git_and_non_regular_files_are_refused(repo: Path) -> None:
    (repo / ".env").symlink_to(".git/config")
    os.mkfifo(repo / ".env.fifo")
    spec, created = made(repo, ".env*")
    assert created.copied == []
    assert sorted(created.refused) == [".env.fifo: not a regular file", ".env: a link into .git"]
    assert not os.path.lexists(spec.path / ".env")


def test_a_link_swapped_in_after_the_check_is_not_followed(
    repo: Path, secret: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The file is opened along its checked path with O_NOFOLLOW: a link put there
    between the check and the open makes the open fail."""
    (repo / ".env").write_text("KEEP=1\n")
    checked = copy_module._inside

    def then_swap(real_source: Path, found: Path) -> tuple[str, ...]:
        parts = checked(real_source, found)
        found.unlink()
        found.symlink_to(secret)
        return parts

    monkeypatch.setattr(copy_module, "_inside", then_swap)
    dest = tmp_path / "dest"
    dest.mkdir()
    copies = copy_untracked(repo, dest, [".env"])
    assert copies.copied == []
    assert copies.refused == [".env: cannot be read safely (a link appeared on its way)"]
    assert list(dest.iterdir()) == []


def test_a_tracked_link_in_the_worktree_is_not_written_through(
    repo: Path, git: Git, secret: Path
) -> None:
    """The worktree has ``sub`` as a committed link out; the main checkout has a real
    folder there now, with an untracked file: it is not written through the link."""
    (repo / "sub").symlink_to(secret.parent)
    git(repo, "add", "sub")
    git(repo, "commit", "-q", "-m", "a link")
    (repo / "sub").unlink()
    (repo / "sub").mkdir()
    (repo / "sub" / ".env").write_text("KEEP=1\n")
    _spec, created = made(repo, "sub/.env")
    assert created.copied == []
    assert created.refused[0].startswith("sub/.env: cannot be written safely in the worktree")
    assert sorted(p.name for p in secret.parent.iterdir()) == ["gateway.token"]
