"""FileRoots: the agent's file system requests stay inside the session's roots."""

from __future__ import annotations

from pathlib import Path

import pytest

from chorus.bodies.acp import MAX_READ_BYTES, FileRoots, FsAccessError


@pytest.fixture
def tree(tmp_path: Path) -> tuple[FileRoots, Path, Path]:
    work, extra, outside = tmp_path / "work", tmp_path / "extra", tmp_path / "outside"
    for folder in (work, extra, outside):
        folder.mkdir()
    (work / "a.txt").write_text("one\ntwo\nthree\n")
    (outside / "secret.txt").write_text("secret")
    return FileRoots.of(work, [extra]), work, outside


def test_reads_inside_a_root(tree: tuple[FileRoots, Path, Path]) -> None:
    roots, work, _ = tree
    assert roots.read_text(str(work / "a.txt")) == "one\ntwo\nthree\n"
    assert roots.read_text(str(work / "a.txt"), line=2, limit=1) == "two"
    assert roots.read_text(str(work / "a.txt"), line=2) == "two\nthree\n"


@pytest.mark.parametrize("how", ["dotdot", "symlink", "dangling", "dir_symlink", "relative"])
def test_escapes_are_refused(tree: tuple[FileRoots, Path, Path], how: str) -> None:
    roots, work, outside = tree
    if how == "dotdot":
        path = f"{work}/../outside/secret.txt"
    elif how == "symlink":
        (work / "link").symlink_to(outside / "secret.txt")
        path = str(work / "link")
    elif how == "dangling":
        (work / "dangling").symlink_to(outside / "not-yet.txt")
        path = str(work / "dangling")
    elif how == "dir_symlink":
        (work / "out").symlink_to(outside)
        path = str(work / "out" / "new.txt")
    else:
        path = "a.txt"
    with pytest.raises(FsAccessError) as caught:
        roots.read_text(path)
    assert caught.value.code == -32602
    with pytest.raises(FsAccessError):
        roots.write_text(path, "pwned")
    assert (outside / "secret.txt").read_text() == "secret"
    assert not (outside / "not-yet.txt").exists()
    assert not (outside / "new.txt").exists()


def test_missing_file_is_not_found_or_empty(tree: tuple[FileRoots, Path, Path]) -> None:
    roots, work, _ = tree
    with pytest.raises(FsAccessError) as caught:
        roots.read_text(str(work / "new.txt"))
    assert caught.value.code == -32002
    assert caught.value.error_object()["data"] == {"path": str(work / "new.txt")}
    assert roots.read_text(str(work / "new.txt"), missing_as_empty=True) == ""


def test_writes_create_parents_in_any_root(tree: tuple[FileRoots, Path, Path]) -> None:
    roots, _, _ = tree
    extra = roots.roots[1]
    roots.write_text(str(extra / "deep" / "b.txt"), "bee")
    assert (extra / "deep" / "b.txt").read_text() == "bee"


def test_oversized_and_directory_reads_are_errors(tree: tuple[FileRoots, Path, Path]) -> None:
    roots, work, _ = tree
    (work / "big.bin").write_bytes(b"x" * (MAX_READ_BYTES + 1))
    with pytest.raises(FsAccessError, match="too large"):
        roots.read_text(str(work / "big.bin"))
    with pytest.raises(FsAccessError) as caught:
        roots.read_text(str(work))
    assert caught.value.code == -32603
