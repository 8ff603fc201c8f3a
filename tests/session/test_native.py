"""A body runs Codex's native program, not its Node launcher, with the launcher's
variables; anything that is not that launcher is run as it is."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from chorus._errors import AgentNotFoundError
from chorus.agents import find_agent
from chorus.bodies import allow_all
from chorus.config import ChorusConfig
from chorus.session import Launch
from chorus.session._launcher import BodyLauncher
from chorus.session._native import _TARGETS, native_cli
from chorus.store import SqliteStore

TARGET = _TARGETS.get((sys.platform, platform.machine()))
needs_target = pytest.mark.skipif(TARGET is None, reason="no Codex build for this platform")


def _package(root: Path, *, nested: bool) -> tuple[Path, Path]:
    """A Codex npm install under ``root``: (the .bin link, the native program)."""
    assert TARGET is not None
    package, triple = TARGET
    codex = root / "node_modules" / "@openai" / "codex"
    (codex / "bin").mkdir(parents=True)
    (codex / "bin" / "codex.js").write_text("#!/usr/bin/env node\n")
    place = codex / "node_modules" / "@openai" if nested else codex.parent
    vendor = place / package / "vendor" / triple
    (vendor / "bin").mkdir(parents=True)
    (vendor / "codex-package.json").write_text(json.dumps({"entrypoint": "bin/codex"}))
    program = vendor / "bin" / "codex"
    program.write_text("#!/bin/sh\n")
    program.chmod(0o755)
    link = root / "node_modules" / ".bin" / "codex"
    link.parent.mkdir(parents=True)
    link.symlink_to(codex / "bin" / "codex.js")
    return link, program


@needs_target
@pytest.mark.parametrize("nested", [False, True])
def test_the_launcher_link_gives_the_native_program_and_its_variables(
    tmp_path: Path, nested: bool
) -> None:
    link, program = _package(tmp_path, nested=nested)
    found = native_cli(link)
    assert found.path == program
    root = (tmp_path / "node_modules" / "@openai" / "codex").resolve()
    assert found.env == {"CODEX_MANAGED_PACKAGE_ROOT": str(root), "CODEX_MANAGED_BY_NPM": "1"}


@needs_target
def test_a_missing_platform_package_keeps_the_launcher(tmp_path: Path) -> None:
    link, program = _package(tmp_path, nested=False)
    program.unlink()
    found = native_cli(link)
    assert found.path == link
    assert found.env == {}


def test_any_other_program_is_run_as_it_is(tmp_path: Path) -> None:
    other = tmp_path / "codex"
    other.write_text("#!/bin/sh\n")
    assert native_cli(other).path == other
    assert native_cli(tmp_path / "missing").path == tmp_path / "missing"


@pytest.mark.e2e
def test_the_pinned_codex_runs_natively_and_answers_like_its_launcher(
    tmp_path: Path, chorus_home: Path
) -> None:
    """The real install: the launcher's program and Chorus's give the same version,
    and a Codex body's options name the native program with the variables."""
    try:
        launcher_path = find_agent("codex")
    except AgentNotFoundError as exc:
        if os.environ.get("CHORUS_REQUIRE_AGENTS") == "1":
            raise
        pytest.skip(f"codex CLI not installed: {exc}")
    found = native_cli(launcher_path)
    assert found.path != launcher_path
    assert found.path.name == "codex"
    assert found.env["CODEX_MANAGED_BY_NPM"] == "1"
    env = {**os.environ, **found.env}
    ours = subprocess.run([found.path, "--version"], capture_output=True, text=True, env=env)
    theirs = subprocess.run([launcher_path, "--version"], capture_output=True, text=True)
    assert ours.returncode == 0
    assert ours.stdout == theirs.stdout
    config = ChorusConfig.model_validate({"sandbox": {"mode": "off"}})
    launch = Launch(
        body="codex", model=None, resume=None, gate=None, mode=None, permission=allow_all
    )
    store = SqliteStore(tmp_path / "chorus.db")
    options = BodyLauncher(config, store).options_for(str(tmp_path), launch, lambda *a: None)
    assert options.executable == found.path
    assert options.env["CODEX_MANAGED_PACKAGE_ROOT"] == found.env["CODEX_MANAGED_PACKAGE_ROOT"]
