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


def test_a_stale_spec_is_used_at_once_and_probed_again_behind(
    chorus_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A day-old spec does not hold a session's start: it is returned as it is while a
    thread probes again, and the next caller gets the new one."""
    log, release = _node_shim(tmp_path, monkeypatch)
    release.touch()
    old = system_spec(now=time.time() - 2 * 86_400)
    assert old["languages"]["node"] == "v99.0.0"
    assert _runs(log) == 1
    release.unlink()  # the next probe's node now waits
    (tmp_path / "bin" / "node").write_text(
        SHIM.format(log=log, release=release).replace("v99.0.0", "v100.0.0")
    )
    started = time.monotonic()
    assert system_spec() == old  # the stale one, at once
    assert time.monotonic() - started < 5
    release.touch()
    deadline = time.monotonic() + 60
    while system_spec()["languages"].get("node") != "v100.0.0":
        assert time.monotonic() < deadline, "the stale spec was never probed again"
        time.sleep(0.05)
    assert _runs(log) == 2


def test_the_languages_are_probed_at_once_not_one_after_another(
    chorus_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each ``--version`` waits for the others' start: run one after the other, the
    first would wait forever for the second."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, other in (("node", "go"), ("go", "node")):
        shim = bin_dir / name
        shim.write_text(
            f'#!/bin/sh\ntouch "{tmp_path}/{name}-started"\n'
            f'i=0; while [ ! -e "{tmp_path}/{other}-started" ] && [ $i -lt 100 ]; do '
            "sleep 0.05; i=$((i+1)); done\n"
            f'[ -e "{tmp_path}/{other}-started" ] && echo together || echo alone\n'
        )
        shim.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    spec = system_spec()
    assert spec["languages"]["node"] == "together"
    assert spec["languages"]["go"] == "together"
