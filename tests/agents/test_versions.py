"""An agent CLI's ``--version`` answer is asked once per binary file, and asked again
when the file changes, when the answer is a day old, or when it was not remembered."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from chorus.agents import _versions
from chorus.agents._install import _version_of


def fake_cli(folder: Path, version: str) -> tuple[Path, Path]:
    """A CLI that answers ``version`` and counts how often it was asked."""
    folder.mkdir(parents=True, exist_ok=True)
    count = folder / "asked"
    cli = folder / "fake-cli"
    cli.write_text(f'#!/bin/sh\necho x >> "{count}"\necho "{version}"\n')
    cli.chmod(0o755)
    return cli, count


def asked(count: Path) -> int:
    return len(count.read_text().splitlines()) if count.exists() else 0


def test_the_same_binary_is_asked_once(chorus_home: Path, tmp_path: Path) -> None:
    chorus_home.mkdir()
    cli, count = fake_cli(tmp_path / "bin", "1.0.0")
    link = tmp_path / "link"
    link.symlink_to(cli)
    assert _version_of(cli) == "1.0.0"
    assert _version_of(cli) == "1.0.0"
    assert _version_of(link) == "1.0.0"  # the same file by another name
    assert asked(count) == 1
    saved = json.loads(_versions.cache_path().read_text())
    assert list(saved) == [str(cli.resolve())]


def test_a_changed_binary_is_asked_again(chorus_home: Path, tmp_path: Path) -> None:
    chorus_home.mkdir()
    cli, count = fake_cli(tmp_path / "bin", "1.0.0")
    assert _version_of(cli) == "1.0.0"
    fake_cli(tmp_path / "bin", "2.0.0-upgraded")  # reinstalled: new size and mtime
    assert _version_of(cli) == "2.0.0-upgraded"
    st = cli.stat()
    os.utime(cli, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))  # touched only
    assert _version_of(cli) == "2.0.0-upgraded"
    assert asked(count) == 3


def test_an_old_answer_is_asked_again(
    chorus_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chorus_home.mkdir()
    cli, count = fake_cli(tmp_path / "bin", "1.0.0")
    assert _version_of(cli) == "1.0.0"
    later = time.time() + _versions.MAX_AGE_S + 1
    monkeypatch.setattr(time, "time", lambda: later)
    assert _version_of(cli) == "1.0.0"
    assert asked(count) == 2


def test_a_failed_probe_or_a_bad_file_is_not_trusted(chorus_home: Path, tmp_path: Path) -> None:
    chorus_home.mkdir()
    failing = tmp_path / "bin" / "broken"
    failing.parent.mkdir()
    failing.write_text("#!/bin/sh\nexit 3\n")
    failing.chmod(0o755)
    assert _version_of(failing) is None
    assert not _versions.cache_path().exists()  # nothing to remember
    cli, count = fake_cli(tmp_path / "bin2", "1.0.0")
    _versions.cache_path().parent.mkdir()
    forged = {str(cli.resolve()): {"stamp": "nope", "version": 7, "at": "x"}}
    _versions.cache_path().write_text(json.dumps(forged))
    assert _version_of(cli) == "1.0.0"
    assert asked(count) == 1


def test_no_home_no_file(chorus_home: Path, tmp_path: Path) -> None:
    cli, count = fake_cli(tmp_path / "bin", "1.0.0")
    assert _version_of(cli) == "1.0.0"
    assert _version_of(cli) == "1.0.0"
    assert asked(count) == 2  # asked each time
    assert not chorus_home.exists()  # a read command does not make a home
