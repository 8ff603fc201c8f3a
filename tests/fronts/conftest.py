"""Fixtures for front tests: a CHORUS_HOME whose claude, codex and gemini bodies talk
to the scripted model server, the daemon stopped at teardown, and the Chorus log."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from chorus._errors import AgentNotFoundError
from chorus.agents import find_agent
from chorus.daemon import stop_daemon
from chorus.events import Event
from chorus.store import Redactor, SqliteStore
from chorus.testing import ModelServer, offline_env
from tests.daemon.conftest import _module_home, _share

#: The ``chorus`` command as a front's client would launch it.
CHORUS = [sys.executable, "-m", "chorus"]


@dataclass
class FrontHome:
    home: Path
    work: Path
    server: ModelServer

    chorus: tuple[str, ...] = tuple(CHORUS)

    @property
    def env(self) -> dict[str, str]:
        return os.environ.copy()

    def asks_go_to_the_client(self) -> None:
        """Shell calls that ``rm -rf`` are *ask* (escalate-only risk), and the client's
        answer settles them (``[brain] authority = "governing"``)."""
        policy = 'version = 1\n[ask]\ntimeout_s = 60\n[risk]\nauthority = "escalate-only"\n'
        (self.home / "policy.toml").write_text(policy)
        with (self.home / "config.toml").open("a") as config:
            config.write('[brain]\nauthority = "governing"\n')
        for folder in ("keep", "junk"):
            (self.work / folder).mkdir()
            (self.work / folder / "file.txt").write_text(folder)

    async def log(self, session_id: str) -> list[Event]:
        """The session's events as Chorus logged them."""
        async with SqliteStore(redactor=Redactor()) as store:
            return await store.read_events(session_id)

    async def sessions(self) -> list[str]:
        async with SqliteStore(redactor=Redactor()) as store:
            return [record.id for record in await store.list_sessions()]


def write_config(home: Path, agents: dict[str, dict[str, str]], extra: str = "") -> None:
    lines = ["[daemon]", "notifications = false", "[gateway]", "port = 0"]
    for name, env in agents.items():
        lines.append(f"[agents.{name}.env]")
        lines += [f"{key} = {json.dumps(value)}" for key, value in env.items()]
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text("\n".join(lines) + "\n" + extra)


def _configure(home: Path, bodies: Path, server: ModelServer) -> None:
    """``home``'s config: every installed CLI (its home under ``bodies``) pointed at
    ``server``'s default lane; a missing CLI skips the test."""
    agents = {}
    for cli in ("claude", "codex", "gemini"):
        try:
            find_agent(cli)
        except AgentNotFoundError as exc:
            pytest.skip(f"{cli} CLI not installed: {exc}")
        agents[cli] = offline_env(cli, bodies / f"{cli}-home", server.url)
    write_config(home, agents)


@pytest.fixture
def front_home(chorus_home: Path, tmp_path: Path, model_server: ModelServer) -> Iterator[FrontHome]:
    """Every installed CLI pointed at ``model_server``; the daemon stops afterwards. For
    a test that changes the config or policy, or reads the whole audit log."""
    _configure(chorus_home, tmp_path, model_server)
    work = tmp_path / "work"
    work.mkdir()
    try:
        yield FrontHome(chorus_home, work, model_server)
    finally:
        stop_daemon()


@pytest.fixture(scope="module")
def module_front(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[FrontHome]:
    """One home, scripted server and daemon as ``front_home`` makes for a whole test
    module. Use ``shared_front``."""
    for root, home, server in _module_home(request, tmp_path_factory):
        _configure(home, root, server)
        yield FrontHome(home, root / "work", server)


@pytest.fixture
def shared_front(
    module_front: FrontHome, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> Iterator[FrontHome]:
    """The module's daemon, for a test that reads only its own sessions and the
    requests its own turns made (the server is reset, the work folder its own, and its
    jobs have ended before the next test): as ``shared_daemon`` is shared."""
    for work in _share(module_front.home, module_front.server, monkeypatch, tmp_path):
        yield FrontHome(module_front.home, work, module_front.server)
