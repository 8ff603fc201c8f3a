"""a follow-up after a daemon restart knows the earlier turns: Gemini over ACP loads
its own session; a body whose CLI lost its session gets the session's transcript
from the log instead, and the scripted server sees it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from chorus.daemon import stop_daemon
from chorus.events import Notice, parse_event
from chorus.testing import ModelServer, offline_env, text
from tests.daemon.conftest import Daemon

pytestmark = pytest.mark.e2e


@pytest.fixture
def gemini_daemon(chorus_home: Path, tmp_path: Path) -> Iterator[tuple[ModelServer, Path]]:
    work = tmp_path / "work"
    work.mkdir()
    with ModelServer() as server:
        env = offline_env("gemini", tmp_path / "gemini-home", server.url)
        lines = ["[daemon]", "notifications = false", "[gateway]", "port = 0"]
        lines += ["[agents.gemini.env]", *(f"{k} = {json.dumps(v)}" for k, v in env.items())]
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


def test_gemini_follow_up_after_a_restart_resumes_its_own_session(
    gemini_daemon: tuple[ModelServer, Path],
) -> None:
    """Gemini over ACP loads its own session (``session/load``) in a new process: the
    earlier turns reach the model as Gemini's own history, not as text Chorus wrote;
    and again after a second restart (the file the load left behind would have had
    Gemini's cleanup delete the session at the next start)."""
    server, work = gemini_daemon
    answers = ["noted: pineapple", "the word was pineapple", "still pineapple"]
    server.script([text(a) for a in answers])
    first = _ask(work, "remember the word pineapple", "--body", "gemini")
    session = first[0].session_id  # type: ignore[attr-defined]
    stop_daemon()  # the warm body goes with it: the follow-up needs a fresh Gemini
    follow = _ask(work, "which word did I give you?", "--session", session)
    requests = server.turn_requests()
    assert len(requests) == 2
    contents = requests[1].body["contents"]
    said = [(c["role"], json.dumps(c["parts"])) for c in contents]
    assert any(role == "model" and "noted: pineapple" in parts for role, parts in said)
    assert "remember the word pineapple" in json.dumps(contents)
    notices = [e.message for e in follow if isinstance(e, Notice) and e.kind == "resume"]
    assert len(notices) == 1
    assert notices[0].startswith("resumed natively")
    assert (follow[-1].state, follow[-1].result) == ("succeeded", "the word was pineapple")  # type: ignore[attr-defined]
    stop_daemon()
    again = _ask(work, "and now?", "--session", session)
    said = [(c["role"], json.dumps(c["parts"])) for c in server.turn_requests()[2].body["contents"]]
    assert any(role == "model" and "the word was pineapple" in parts for role, parts in said)
    notices = [e.message for e in again if isinstance(e, Notice) and e.kind == "resume"]
    assert notices == [notices[0]]
    assert notices[0].startswith("resumed natively")


#: Bodies whose CLI keeps the session on disk: (body, CLI lane, files to lose).
LOST_SESSIONS = {
    "gemini": ("gemini", "gemini-home", "session-*.json*"),
    "codex-exec": ("codex", "codex-home", "rollout-*.jsonl"),
    "gemini-headless": ("gemini", "gemini-home", "session-*.json*"),
}


def _lose_native_sessions(tmp_path: Path, home: str, pattern: str) -> int:
    """Delete the CLI's own record of its sessions (as a wiped or moved home would)."""
    found = list((tmp_path / home).rglob(pattern))
    for path in found:
        path.unlink()
    return len(found)


@pytest.mark.parametrize("body", list(LOST_SESSIONS))
def test_one_shot_follow_up_heals_a_lost_native_session(
    body: str, daemon_with: Callable[..., Daemon], tmp_path: Path
) -> None:
    lane, home, pattern = LOST_SESSIONS[body]
    chorus = daemon_with()
    chorus.server.script([text("noted: pineapple"), text("the word was pineapple")], lane=lane)
    first = chorus.ask("remember the word pineapple", "--body", body)
    session = first[0].session_id
    stop_daemon()
    assert _lose_native_sessions(tmp_path, home, pattern) >= 1
    follow = chorus.ask("which word did I give you?", "--session", session)
    requests = chorus.server.turn_requests(lane=lane)
    assert len(requests) == 2
    seen = json.dumps(requests[1].body)
    assert "remember the word pineapple" in seen
    assert "noted: pineapple" in seen
    notices = [e.message for e in follow if isinstance(e, Notice) and e.kind == "resume"]
    assert len(notices) == 1
    assert notices[0].startswith("rebuilt from the log")
    assert (follow[-1].state, follow[-1].result) == ("succeeded", "the word was pineapple")
