"""File access in drop folders that no link steers and no pipe blocks."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from chorus.teams._nofollow import (
    NotRegularError,
    UnsafeFolderError,
    open_folder,
    read_regular,
    write_replacing,
)


def test_a_regular_file_is_read_up_to_one_byte_past_the_limit(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "m.txt").write_bytes(b"x" * 100)
    with open_folder(tmp_path, ["a"]) as folder:
        assert read_regular(folder, "m.txt", 10) == b"x" * 11


@pytest.mark.parametrize("kind", ["link", "fifo", "folder", "socket"])
def test_anything_else_is_refused_without_being_opened(tmp_path: Path, kind: str) -> None:
    secret = tmp_path / "secret"
    secret.write_text("SECRET")
    entry = tmp_path / "entry"
    if kind == "link":
        entry.symlink_to(secret)
    elif kind == "fifo":
        os.mkfifo(entry)  # a blocking open for reading would wait for a writer forever
    elif kind == "folder":
        entry.mkdir()
    else:
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(entry))
        sock.close()
    with open_folder(tmp_path, []) as folder, pytest.raises(NotRegularError) as refused:
        read_regular(folder, "entry", 100)
    assert {"link": "symbolic link", "fifo": "named pipe", "folder": "folder"}.get(
        kind, "socket"
    ) in str(refused.value)


def test_a_linked_folder_on_the_way_is_refused(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "linked").symlink_to(tmp_path / "real")
    with pytest.raises(UnsafeFolderError), open_folder(tmp_path, ["linked"]):
        pass


def test_a_reason_replaces_a_planted_link_instead_of_writing_through_it(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("untouched")
    (tmp_path / "x.reason").symlink_to(victim)
    with open_folder(tmp_path, []) as folder:
        write_replacing(folder, "x.reason", "why\n")
    assert victim.read_text() == "untouched"
    assert not (tmp_path / "x.reason").is_symlink()
    assert (tmp_path / "x.reason").read_text() == "why\n"
