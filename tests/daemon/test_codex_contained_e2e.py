"""Codex under Chorus's OS sandbox, on the real CLI: in the default mode its commands
run in Chorus's sandbox only (no workspace sandbox of Codex's nested inside, which
cost each command 80-150 ms and its network), while Codex still asks Chorus about
each command. ``[sandbox] nested = true`` keeps Codex's own sandbox inside (the
control: the same command then runs under Codex's seccomp filter)."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from chorus.sandbox import bwrap_path
from chorus.testing import shell, text
from tests.daemon.conftest import Daemon

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(bwrap_path() is None, reason="no bubblewrap")]

PROBE = "grep -E '^(Seccomp|NoNewPrivs):' /proc/self/status; echo made > made.txt"


@pytest.mark.parametrize(("nested", "seccomp"), [(False, "0"), (True, "2")])
def test_codex_commands_run_in_chorus_sandbox_without_codex_own_nested(
    daemon_with: Callable[..., Daemon], nested: bool, seccomp: str
) -> None:
    chorus = daemon_with(*(["[sandbox]", "nested = true"] if nested else []))
    chorus.server.script([shell(PROBE), text("probed")], lane="codex")
    events = chorus.ask("probe the sandbox", "--body", "codex")
    assert events[-1].state == "succeeded"
    kinds = [e.type for e in chorus.client.events(events[-1].job_id, follow=False)]
    assert "permission_request" in kinds  # Codex still asked Chorus about the command
    results = [r.last_tool_result() for r in chorus.server.turn_requests(lane="codex")]
    seen = json.dumps([r.content for r in results if r is not None])
    assert "NoNewPrivs:\\t1" in seen  # Chorus's sandbox (bubblewrap) holds it
    assert f"Seccomp:\\t{seccomp}" in seen, seen
    assert (chorus.work / "made.txt").read_text() == "made\n"
