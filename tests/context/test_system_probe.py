"""The system spec is probed once at a time: a caller that comes while a probe is under
way (a job while the daemon's warm-up probes) waits for it and gets its result."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from chorus.context import system_spec

#: A ``node`` on PATH that notes each run and answers once ``release`` exists.
SHIM = """#!/bin/sh
echo run >> "{log}"
while [ ! -e "{release}" ]; do sleep 0.05; done
echo v99.0.0
"""


def _node_shim(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    bin_dir, log, release = tmp_path / "bin", tmp_path / "node-runs", tmp_path / "release"
    bin_dir.mkdir()
    node = bin_dir / "node"
    node.write_text(SHIM.format(log=log, release=release))
    node.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return log, release


def _runs(log: Path) -> int:
    return len(log.read_text().splitlines()) if log.exists() else 0


def test_a_second_caller_waits_for_the_probe_under_way(
    chorus_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log, release = _node_shim(tmp_path, monkeypatch)
    specs: list[dict[str, Any]] = []
    first = threading.Thread(target=lambda: specs.append(system_spec()))
    first.start()
    deadline = time.monotonic() + 60
    while _runs(log) == 0 and time.monotonic() < deadline:  # the warm-up's probe runs node
        time.sleep(0.05)
    assert _runs(log) == 1
    second = threading.Thread(target=lambda: specs.append(system_spec()))
    second.start()
    time.sleep(0.5)  # the job's call finds no spec yet: the probe has not answered
    release.touch()
    first.join(60)
    second.join(60)
    assert _runs(log) == 1
    assert [spec["languages"]["node"] for spec in specs] == ["v99.0.0", "v99.0.0"]
