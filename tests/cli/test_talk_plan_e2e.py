"""The daemon's talk plan for Codex's and Gemini's one-shot bodies (their own UIs
are driven in a pseudo-terminal by ``test_talk_e2e``): the CLI's own mode flags,
the sandbox wrapper, and the turns a run of the CLI adds to its own transcript
meanwhile brought into the session's log, tool calls included."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from chorus._errors import ChorusError
from chorus.agents import find_agent
from chorus.session._native import native_cli
from chorus.testing import CODEX_OFFLINE_FLAGS, GEMINI_MODEL, offline_env, shell, text

if TYPE_CHECKING:
    from collections.abc import Callable

    from conftest import Daemon  # type: ignore[attr-defined]

pytestmark = pytest.mark.e2e

#: What the person's turn in the CLI stands in for: the CLI resuming the session.
RESUMED = {
    "codex": lambda exe, sid, prompt: [
        exe, "exec", "resume", "--json", *CODEX_OFFLINE_FLAGS,
        "--dangerously-bypass-approvals-and-sandbox", sid, prompt,
    ],
    "gemini": lambda exe, sid, prompt: [
        exe, "-p", prompt, "--resume", sid, "--output-format", "stream-json", "--yolo",
        "-m", GEMINI_MODEL,
    ],
}  # fmt: skip
#: The CLI's own flags for the session's mode, after ``resume ID``.
MODE_FLAGS = {
    "codex": ["-c", 'sandbox_mode="workspace-write"', "-a", "on-request"],
    "gemini": ["--approval-mode", "default"],
}


@pytest.mark.parametrize(("cli", "body"), [("codex", "codex-exec"), ("gemini", "gemini-headless")])
def test_talk_plan_and_import(
    daemon_with: Callable[..., Daemon], tmp_path: Path, cli: str, body: str
) -> None:
    daemon = daemon_with()
    daemon.server.script([text("first answer")], lane=cli)
    events = daemon.ask("hello", "--body", body)
    session = daemon.session_of(events)
    sid, native = session["id"], session["native_session_id"]
    client = daemon.client
    client.pause(sid)
    plan: dict[str, Any] = client.call("POST", f"/talk/{sid}")
    assert plan["cli"] == cli
    # Codex's UI runs its own app-server, never a shared one (see test_talk_e2e)
    head = ["resume", "--no-daemon", native] if cli == "codex" else ["--resume", native]
    assert plan["argv"][1 : 1 + len(head)] == head
    flags = plan["argv"][1 + len(head) :]
    assert flags[: len(MODE_FLAGS[cli])] == MODE_FLAGS[cli]
    wrapper = Path(plan["argv"][0]).read_text()
    assert plan["sandboxed"]
    assert "bwrap" in wrapper  # the same wrapper a body of the session gets
    # the CLI's own program (Codex's native one, without its Node launcher)
    assert str(native_cli(find_agent(cli)).path) in wrapper  # type: ignore[arg-type]
    daemon.server.script([shell("echo talked > talked.txt"), text("talk answer")], lane=cli)
    env = offline_env(cli, tmp_path / f"{cli}-home", daemon.server.lane_url(cli))  # type: ignore[arg-type]
    argv = RESUMED[cli](str(find_agent(cli)), native, "typed in the talk")  # type: ignore[arg-type]
    ran = subprocess.run(argv, cwd=session["cwd"], env=env, stdin=subprocess.DEVNULL,
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert ran.returncode == 0, ran.stderr[-2000:]
    done = client.call("POST", f"/talk/{sid}/end")
    client.resume(sid)
    assert done["turns"] == 1
    with pytest.raises(ChorusError, match="no talk under way"):
        client.call("POST", f"/talk/{sid}/end")  # imported once
    mirror = daemon.home / "sessions" / f"{sid}.jsonl"
    talked = [json.loads(line) for line in mirror.read_text().splitlines()]
    talked = [e for e in talked if e["seq"] > session["last_seq"]]
    typed = [e["message"] for e in talked if e["type"] == "notice" and e["kind"] == "talk"]
    assert typed == ["typed in the talk"]  # not "hello": only what the talk added
    assert [e["text"] for e in talked if e["type"] == "text"] == ["talk answer"]
    calls = [e for e in talked if e["type"] == "tool_call"]
    assert [c["tool"] for c in calls] == ["shell"]
    assert [e["call_id"] for e in talked if e["type"] == "tool_result"] == [calls[0]["call_id"]]
