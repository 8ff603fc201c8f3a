"""The ``**/NAME`` denied patterns expanded in one walk match what :mod:`glob` finds;
the denied programs' copies are found again when a folder on ``PATH`` changes."""

from __future__ import annotations

import glob
import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from chorus.policy import Policy
from chorus.sandbox import _walk as walk
from chorus.sandbox import layout
from chorus.sandbox._stubs import stub_targets
from chorus.sandbox._walk import is_tree_pattern, tree_matches

PATTERNS = ["**/.env", "**/.env.*", "**/id_rsa*", "**/*.pem", "**/[ab]?.key"]


def _tree(root: Path) -> None:
    for rel in [
        ".env",
        "a/.env.local",
        "a/b/c/server.pem",
        "a/.hidden/deep.pem",  # in a hidden folder: ** does not enter it
        "a/.dot.pem",  # a dot name matches only a dotted pattern
        "keys/id_rsa",
        "keys/id_rsa.pub",
        "keys/ab.key",
        "keys/abc.key",
        "plain.txt",
    ]:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x")
    (root / "loop").symlink_to(root, target_is_directory=True)  # a link back up
    outside = root.parent / f"{root.name}-outside"
    outside.mkdir()
    (outside / "linked.pem").write_text("x")
    (root / "a" / "out").symlink_to(outside, target_is_directory=True)


def _globbed(root: Path) -> set[Path]:
    found: set[Path] = set()
    for pattern in PATTERNS:
        for match in glob.iglob(str(root / pattern), recursive=True):
            found.add(Path(match).resolve())
    return found


def test_one_walk_finds_what_glob_finds(tmp_path: Path) -> None:
    root = tmp_path / "work"
    root.mkdir()
    _tree(root)
    found = tree_matches(PATTERNS, root, 1000)
    assert len(found) == len(set(found))  # the link back up is walked once
    names = {p.name for p in found}
    # a linked folder is entered, as glob does; hidden folders and dot names are not
    assert names == {".env", ".env.local", "server.pem", "linked.pem", "id_rsa", "id_rsa.pub"} | {
        "ab.key"
    }
    assert set(found) == _globbed_no_loop(root)


def _globbed_no_loop(root: Path) -> set[Path]:
    """glob's answer without the link back up (glob would follow it round)."""
    (root / "loop").unlink()
    try:
        return _globbed(root)
    finally:
        (root / "loop").symlink_to(root, target_is_directory=True)


def test_each_pattern_stops_at_its_limit(tmp_path: Path) -> None:
    for n in range(5):
        (tmp_path / f"k{n}.pem").write_text("x")
    (tmp_path / ".env").write_text("x")
    found = tree_matches(["**/*.pem", "**/.env"], tmp_path, 2)
    assert len([p for p in found if p.suffix == ".pem"]) == 2
    assert tmp_path / ".env" in found


def test_only_a_name_after_the_stars_is_a_tree_pattern() -> None:
    assert is_tree_pattern("**/.env")
    assert is_tree_pattern("**/*.p12")
    assert not is_tree_pattern("**/secrets/*.key")
    assert not is_tree_pattern("**/")
    assert not is_tree_pattern("/etc/*.pem")


def test_the_layout_hides_what_the_patterns_match_and_what_others_do(tmp_path: Path) -> None:
    work, home = tmp_path / "work", tmp_path / "home"
    (work / "cfg" / "secrets").mkdir(parents=True)
    (work / "cfg" / ".env").write_text("x")
    (work / "cfg" / "secrets" / "a.key").write_text("x")
    home.mkdir()
    policy = Policy.model_validate(
        {"filesystem": {"denied_paths": ["**/.env", "**/secrets/*.key"]}}
    )
    box = layout(policy, work, {"HOME": str(home), "PATH": "/usr/bin:/bin"}, tmp_path / "ch")
    assert (work / "cfg" / ".env").resolve() in box.hidden_files
    assert (work / "cfg" / "secrets" / "a.key").resolve() in box.hidden_files


def test_the_denied_programs_are_found_again_when_a_folder_changes(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    env = {"PATH": str(bin_dir)}
    assert stub_targets(("frobnicate",), env) == ()
    program = bin_dir / "frobnicate"
    program.write_text("#!/bin/sh\n")
    os.utime(bin_dir, ns=(1, 1))  # whatever the clock's grain: the folder changed
    assert stub_targets(("frobnicate",), env) == (("frobnicate", program.resolve()),)
    program.unlink()
    os.utime(bin_dir, ns=(2, 2))
    assert stub_targets(("frobnicate",), env) == ()


def _listings(monkeypatch: pytest.MonkeyPatch, racy_s: float = 0.0) -> list[str]:
    """The folders each walk lists from now; a folder changed within ``racy_s`` of
    its listing is listed again (a test cannot age a folder's status change time)."""
    monkeypatch.setattr(walk, "RACY_NS", int(racy_s * 1e9))
    listed: list[str] = []
    real = walk._list

    def counted(folder: str, *args: Any) -> Any:
        listed.append(folder)
        return real(folder, *args)

    monkeypatch.setattr(walk, "_list", counted)
    return listed


def test_a_walk_again_lists_only_the_folders_that_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The next body start stats the tree and lists again only a folder where a name
    was added, removed or renamed: what it finds is what a whole walk finds."""
    root = tmp_path / "work"
    for rel in ("a/b/c/keep.txt", "a/b/old.pem", "d/e/plain.txt", "gone/f/x.pem"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("x")
    listed = _listings(monkeypatch)
    names = {p.name for p in tree_matches(PATTERNS, root, 100)}
    assert names == {"old.pem", "x.pem"}
    listed.clear()
    assert {p.name for p in tree_matches(PATTERNS, root, 100)} == names
    assert listed == []  # nothing changed: only stats
    (root / "a" / "b" / "c" / ".env").write_text("x")  # added deep down
    (root / "a" / "b" / "old.pem").rename(root / "a" / "b" / "old.txt")  # renamed away
    shutil.rmtree(root / "gone")  # a whole folder gone
    (root / "d" / "e" / "new").mkdir()
    (root / "d" / "e" / "new" / "id_rsa").write_text("x")  # in a new folder
    found = tree_matches(PATTERNS, root, 100)
    assert {p.name for p in found} == {".env", "id_rsa"}
    assert set(found) == _globbed(root)
    assert set(listed) == {str(root / p) for p in ("", "a/b/c", "a/b", "d/e", "d/e/new")}


def test_a_folder_whose_time_is_set_back_is_still_listed_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A body may write its folder and set the folder's modification time back to
    what it was, to keep a name from the next walk: the walk goes by the status
    change time, which no process sets."""
    root = tmp_path / "work"
    (root / "cfg").mkdir(parents=True)
    _listings(monkeypatch)
    assert tree_matches(PATTERNS, root, 100) == []
    before = (root / "cfg").stat()
    (root / "cfg" / ".env").write_text("x")
    os.utime(root / "cfg", ns=(before.st_atime_ns, before.st_mtime_ns))
    assert (root / "cfg").stat().st_mtime_ns == before.st_mtime_ns
    assert [p.name for p in tree_matches(PATTERNS, root, 100)] == [".env"]


def test_a_folder_changed_just_before_its_listing_is_listed_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A name added in the same tick as the listing may leave the folder's time as
    it was: a folder listed that soon after its change is listed again next time,
    and trusted once its change is older than that."""
    root = tmp_path / "work"
    root.mkdir()
    listed = _listings(monkeypatch, racy_s=0.5)
    for _ in range(2):
        tree_matches(PATTERNS, root, 100)
    assert listed == [str(root), str(root)]
    time.sleep(0.6)
    for _ in range(2):
        tree_matches(PATTERNS, root, 100)
    assert listed == [str(root)] * 3
