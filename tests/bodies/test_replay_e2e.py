"""``chorus replay`` verifies a session of every body: each real CLI runs a tool turn
and a text turn against the scripted server, its raw lines and events go to a real
store as the daemon records them, and a fresh replay codec must reproduce the log."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from chorus.agents import find_agent
from chorus.bodies import BodyOptions, create_body, replay_codecs
from chorus.bodies.acp import acp_agent
from chorus.events import TurnCompleted
from chorus.store import SqliteStore, event_origin, replay
from chorus.testing import (
    ModelServer,
    Scenario,
    claude_env,
    codex_env,
    gemini_env,
    shell,
    text,
)

pytestmark = pytest.mark.e2e

#: body -> (environment maker, how to find its executable)
ENVS: dict[str, Callable[[Path, str], dict[str, str]]] = {
    "claude": claude_env,
    "claude-print": claude_env,
    "codex": codex_env,
    "codex-exec": codex_env,
    "gemini": gemini_env,
    "gemini-headless": gemini_env,
    "codex-acp": codex_env,
    "claude-code-acp": claude_env,
}
CLI = {"claude": "claude", "claude-print": "claude", "codex": "codex", "codex-exec": "codex"}
CLI |= {"gemini": "gemini", "gemini-headless": "gemini"}


def _executable(body: str) -> Path:
    try:
        if body in CLI:
            return find_agent(CLI[body])
        return acp_agent(body).executable()
    except Exception as exc:
        if os.environ.get("CHORUS_REQUIRE_AGENTS") == "1":
            pytest.fail(f"{body}: {exc}")
        pytest.skip(f"{body}: {exc}")


def _scenario() -> Scenario:
    return Scenario.of(shell("echo replayed > r.txt"), text("made it"), text("bye"))


async def _record(store: SqliteStore, body_name: str, options: BodyOptions) -> str:
    session = await store.create_session(body_name, cwd=str(options.cwd))
    tap = store.raw_tap(session.id)
    body = create_body(body_name, replace(options, raw_tap=tap))
    async with body:
        for prompt in ("make r.txt", "say bye"):
            async for event in body.turn(prompt):
                await store.append(session.id, event, origin=event_origin(event))
            assert isinstance(event, TurnCompleted), event
    return session.id


@pytest.mark.parametrize("body_name", list(ENVS))
async def test_replay_matches_a_recorded_session(body_name: str, tmp_path: Path) -> None:
    executable = _executable(body_name)
    work = tmp_path / "work"
    work.mkdir()
    with ModelServer(_scenario()) as server:
        env = ENVS[body_name](tmp_path / "home", server.url)
        options = BodyOptions(
            cwd=work, env=env, executable=executable, permission_mode="bypassPermissions"
        )
        async with SqliteStore(tmp_path / "chorus.db") as store:
            session_id = await _record(store, body_name, options)
            report = await replay(store, session_id, replay_codecs()[body_name])
    assert (work / "r.txt").read_text() == "replayed\n"
    assert report.compared > 5, report.describe()
    assert report.ok, report.describe()
