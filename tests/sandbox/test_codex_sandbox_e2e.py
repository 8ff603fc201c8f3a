"""Codex's own sandbox inside Chorus's, on the real CLI (scripted model): the commands
Codex sandboxes itself (``-s workspace-write``) run, and its sandbox still holds.

Codex runs a sandboxed command through a helper it links into ``$CODEX_HOME/tmp``,
and makes no such link when ``CODEX_HOME`` lies under ``TMPDIR``: its bubblewrap then
looks the helper up by name and every such command failed with "bwrap: execvp
codex-linux-sandbox". Chorus's sandbox set ``TMPDIR`` to ``/tmp`` itself, so any
``CODEX_HOME`` under ``/tmp`` (here, as in every test) broke Codex's sandbox."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from chorus.policy import Policy
from chorus.sandbox import bwrap_path, layout, write_wrapper
from chorus.testing import CODEX_OFFLINE_FLAGS, ModelServer, OfflineCli, shell, text

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(bwrap_path() is None, reason="no bubblewrap")]


def _results(server: ModelServer) -> list[str]:
    found = [r.last_tool_result() for r in server.turn_requests()]
    return [json.dumps(r.content) for r in found if r is not None]


def test_codex_sandboxes_its_commands_inside_chorus_sandbox(
    offline_cli: Callable[..., OfflineCli], model_server: ModelServer, chorus_home: Path
) -> None:
    cli = offline_cli("codex")
    codex_home = Path(cli.env["CODEX_HOME"])
    assert codex_home.is_relative_to("/tmp")  # the case that broke
    # Writable in Chorus's sandbox (the CLI's state), not in Codex's (without /tmp).
    planted = codex_home / "planted.txt"
    model_server.script(
        [shell("echo measured > perf.md"), shell(f"echo planted > {planted}"), text("done")]
    )
    box = layout(Policy(), cli.cwd, cli.env, chorus_home, cli="codex")
    wrapper = write_wrapper(chorus_home / "codex.sh", str(bwrap_path()), box, cli.executable)
    argv = [str(wrapper), "exec", "--json", *CODEX_OFFLINE_FLAGS, "-s", "workspace-write"]
    argv += ["-c", "sandbox_workspace_write.exclude_slash_tmp=true"]  # only the folder
    done = subprocess.run(
        [*argv, "make perf.md"],
        cwd=cli.cwd,
        env=cli.env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    results = _results(model_server)
    assert len(results) == 2, done.stdout[-2000:]
    assert not any("execvp" in r for r in results), results
    assert (cli.cwd / "perf.md").read_text() == "measured\n"
    # Codex's own sandbox ran the second command and held (Chorus's alone lets it write).
    assert not planted.exists()
    assert "Read-only file system" in results[1] or "Permission denied" in results[1]
    assert "PATH aliases" not in done.stderr  # Codex made its helper's links
