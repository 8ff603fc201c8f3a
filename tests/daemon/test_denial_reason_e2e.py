"""Issues 9 and 22: a denied tool's reason reaches the model in the same turn on every
body. Codex and ACP declines carry no message, so the daemon steers it in (Codex) or
the ACP body prompts again within the turn (Gemini over ACP). A one-shot CLI that
refuses in its own words gets the policy's rule and reason with the next prompt."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from chorus.daemon import stop_daemon
from chorus.events import PermissionDecision, parse_event
from chorus.testing import ModelServer, offline_env, shell, text

pytestmark = pytest.mark.e2e


@pytest.fixture
def daemon_for(chorus_home: Path, tmp_path: Path) -> Iterator[tuple[ModelServer, Path]]:
    work = tmp_path / "work"
    work.mkdir()
    with ModelServer() as server:
        lines = ["[daemon]", "notifications = false", "[gateway]", "port = 0"]
        for cli in ("claude", "codex", "gemini"):
            env = offline_env(cli, tmp_path / f"{cli}-home", server.lane_url(cli))
            lines += [f"[agents.{cli}.env]", *(f"{k} = {json.dumps(v)}" for k, v in env.items())]
        chorus_home.mkdir(parents=True, exist_ok=True)
        (chorus_home / "config.toml").write_text("\n".join(lines) + "\n")
        yield server, work
        stop_daemon()


def _ask(work: Path, *args: str) -> list[object]:
    done = subprocess.run(
        [sys.executable, "-m", "chorus", "ask", *args, "--json"],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=work,
        env=os.environ.copy(),
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return [parse_event(line) for line in done.stdout.splitlines()]


def _denied(events: list[object]) -> list[PermissionDecision]:
    return [e for e in events if isinstance(e, PermissionDecision) and e.decision == "deny"]


def test_codex_gets_the_reason_steered_into_the_turn(
    daemon_for: tuple[ModelServer, Path],
) -> None:
    server, work = daemon_for
    server.script(
        [shell("sudo rm -rf /tmp/not-here"), text("understood"), text("ok")], lane="codex"
    )
    events = _ask(work, "clean up", "--body", "codex")
    assert _denied(events)
    seen = [r.last_user_text() or "" for r in server.turn_requests(lane="codex")]
    told = [t for t in seen if t.startswith("[Chorus policy]")]
    assert told, seen
    assert "sudo" in told[0]


def test_gemini_acp_gets_the_reason_in_the_same_turn(
    daemon_for: tuple[ModelServer, Path],
) -> None:
    server, work = daemon_for
    server.script(
        [
            shell("sudo rm -rf /tmp/not-here"),
            text("I could not"),
            text("noted"),
            text("nothing more"),
        ],
        lane="gemini",
    )
    first = _ask(work, "clean up", "--body", "gemini")
    assert _denied(first)
    # The body prompted again within the job: the third request carries the reason.
    told = server.turn_requests(lane="gemini")[2].last_user_text() or ""
    assert told.startswith("[Chorus policy]")
    assert "sudo" in told
    session = first[0].session_id  # type: ignore[attr-defined]
    _ask(work, "what happened?", "--session", session)
    # Gemini cannot load its session: the follow-up comes with the transcript from the
    # log (the denial in it, as a tool result), but the reason is not told again.
    last = server.turn_requests(lane="gemini")[-1].last_user_text() or ""
    assert last.endswith("what happened?")
    assert "[Chorus policy]" not in last.split("[End of transcript")[-1]


def test_gemini_headless_has_a_shell_and_refuses_with_the_policy_s_reason(
    daemon_for: tuple[ModelServer, Path],
) -> None:
    """Headless Gemini drops the tools it would have to ask about; its policy file
    offers the shell, and refuses a denied command with the policy's rule in the
    tool result of the same turn."""
    server, work = daemon_for
    server.script([shell("echo made > made.txt"), shell("sudo ls"), text("done")], lane="gemini")
    _ask(work, "make a file", "--body", "gemini-headless", "--permission-mode", "default")
    assert (work / "made.txt").read_text() == "made\n"
    told = server.turn_requests(lane="gemini")[2].last_tool_result()
    assert told is not None
    assert "[Chorus policy] denied this shell call [shell.denied_command]" in json.dumps(
        told.content
    )


def test_a_one_shot_refusal_in_the_cli_s_words_is_told_with_the_next_prompt(
    daemon_for: tuple[ModelServer, Path],
) -> None:
    """claude -p cannot ask Chorus: Claude refuses ``sudo ls`` in its own words. The log
    has the policy's rule and reason, and the session's next prompt starts with them."""
    server, work = daemon_for
    server.script([shell("sudo ls"), text("I could not"), text("noted")], lane="claude")
    first = _ask(work, "list as root", "--body", "claude-print")
    policy = [d for d in _denied(first) if d.source == "policy"]
    assert policy, _denied(first)
    assert "[Chorus policy] denied this shell call [shell.denied_command]" in str(policy[0].reason)
    refused = server.turn_requests(lane="claude")[1].last_tool_result()
    assert refused is not None
    assert "[Chorus policy]" not in json.dumps(refused.content)  # Claude's own words
    session = first[0].session_id  # type: ignore[attr-defined]
    _ask(work, "what happened?", "--session", session)
    told = server.turn_requests(lane="claude")[-1].last_user_text() or ""
    assert told.startswith("[Chorus policy] These actions were denied"), told
    assert "[shell.denied_command]" in told
    assert told.endswith("what happened?")
