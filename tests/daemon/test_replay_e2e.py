"""Replay of sessions the daemon ran on the real CLIs: the recorded raw lines
re-normalize to the logged events; an altered codec is caught at the first divergence.
``codex exec`` prints no item for some tool calls: they come from Codex's rollout,
are logged and audited like any body's, and replay still matches. A follow-up job
that changes the model keeps a one-shot body (its next run takes the model), so
replay matches across the switch."""

from __future__ import annotations

import json
import shutil
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from chorus.testing import shell, text, write_file

if TYPE_CHECKING:
    from conftest import Chorus, Daemon

pytestmark = pytest.mark.e2e


def test_replay_matches_then_catches_an_altered_codec(chorus: Chorus) -> None:
    chorus.server.script([shell("echo replay > r.txt"), text("replayed")])
    result = chorus.run("ask", "make r.txt", "--body", "claude", "--json")
    assert result.returncode == 0, result.stderr
    session = json.loads(result.stdout.splitlines()[0])["session_id"]
    chorus.run("stop")

    replayed = chorus.run("replay", session)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert "match" in replayed.stdout.lower()

    # A codec that renames the shell tool must be reported at that event.
    import asyncio

    from chorus.bodies.claude import ClaudeCodec
    from chorus.events import ToolCall
    from chorus.store import SqliteStore, replay

    def altered() -> object:
        codec = ClaudeCodec()

        def feed(line: str) -> list[object]:
            return [
                e.model_copy(update={"tool": "exec"}) if isinstance(e, ToolCall) else e
                for e in codec.feed(line)
            ]

        return feed

    async def run() -> object:
        async with SqliteStore() as store:
            return await replay(store, session, altered)  # type: ignore[arg-type]

    report = asyncio.run(run())
    assert not report.ok  # type: ignore[attr-defined]
    divergence = report.divergence  # type: ignore[attr-defined]
    assert divergence.expected["type"] == "tool_call"
    assert divergence.expected["tool"] == "shell"
    assert divergence.got["tool"] == "exec"


def _audit(home: Path, since: float) -> list[dict[str, Any]]:
    """The audit log's entries from ``since`` on (the module's daemon: this test's)."""
    lines = (home / "audit" / "audit.jsonl").read_text().splitlines()
    return [e for e in map(json.loads, lines) if e["ts"] >= since]


def test_codex_exec_logs_audits_and_replays_every_tool_call(shared_daemon: Daemon) -> None:
    """The calls exec leaves out of its stdout (a command its sandbox refused, a patch
    it rejected) are events and audit entries like the others."""
    chorus = shared_daemon
    since = time.time()
    outside = Path("/var/tmp") / f"chorus-replay-{uuid.uuid4().hex[:8]}"
    outside.mkdir()
    try:
        chorus.server.script(
            [
                shell("sudo ls"),
                write_file(str(outside / "out.txt"), "escaped\n"),
                shell("echo ok > ok.txt"),
                text("done"),
            ],
            lane="codex",
        )
        events = chorus.ask("try things", "--body", "codex-exec")
    finally:
        shutil.rmtree(outside, ignore_errors=True)
    session = events[-1].session_id
    calls = {e.call_id: e for e in events if e.type == "tool_call"}
    commands = sorted(str(c.input.get("command") or c.native_tool) for c in calls.values())
    assert len(calls) == 3, commands
    assert any("sudo ls" in c for c in commands), commands
    results = {e.call_id: e for e in events if e.type == "tool_result"}
    assert set(results) == set(calls)
    patch = next(c for c in calls.values() if c.tool == "edit")
    assert results[patch.call_id].is_error
    audited = [a for a in _audit(chorus.home, since) if a["kind"] == "tool_call"]
    assert {a["data"]["call_id"] for a in audited} == set(calls)
    assert {a["session_id"] for a in audited} == {session}
    replayed = chorus.run("replay", session)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert "replay matches the log" in replayed.stdout


#: Body -> (its lane on the scripted server, the model of the follow-up job).
SWITCHED = {
    "claude-print": ("claude", "claude-sonnet-4-5"),
    "codex-exec": ("codex", "gpt-5.4"),
    "gemini-headless": ("gemini", "gemini-2.5-pro"),
    "claude": ("claude", "claude-sonnet-4-5"),
    "codex": ("codex", "gpt-5.4"),
    "gemini": ("gemini", "gemini-2.5-pro"),
}


def _model_of(body: Any, path: str) -> str:
    """The model a request asked for (Gemini names it in the path)."""
    if isinstance(body, dict) and isinstance(body.get("model"), str):
        return str(body["model"])
    return path.split("/models/")[-1].split(":")[0]


@pytest.mark.parametrize("body", sorted(SWITCHED))
def test_replay_matches_after_a_model_switch(shared_daemon: Daemon, body: str) -> None:
    chorus = shared_daemon
    lane, model = SWITCHED[body]
    chorus.server.script([shell("echo one > one.txt"), text("first"), text("second")], lane=lane)
    first = chorus.ask("make one.txt", "--body", body)
    session = first[-1].session_id
    second = chorus.ask("and now?", "--session", session, "--model", model)
    assert second[-1].state == "succeeded"
    last = chorus.server.turn_requests(lane=lane)[-1]
    assert _model_of(last.body, last.path) == model
    replayed = chorus.run("replay", session)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert "replay matches the log" in replayed.stdout
