"""``chorus sessions list|show`` and ``chorus replay`` against a recorded CHORUS_HOME."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import chorus.cli._store_cmd  # noqa: F401  (registers the commands)
from chorus.cli import app
from chorus.events import Event, Text, Unknown
from chorus.store import Redactor, SqliteStore, register_replay_codec

runner = CliRunner()


def echo_codec(line: str) -> list[Event]:
    """Stateless test codec: ``say:X`` -> Text(X), anything else -> Unknown."""
    return [Text(text=line[4:])] if line.startswith("say:") else [Unknown(raw=line)]


def shouting_codec(line: str) -> list[Event]:
    return [Text(text=line[4:].upper())] if line.startswith("say:") else [Unknown(raw=line)]


def populate() -> None:
    async def run() -> None:
        async with SqliteStore(redactor=Redactor()) as store:
            await store.create_session("echo", session_id="s-echo", model="m1")
            await store.create_session("shout", session_id="s-shout")
            await store.create_session("nobody", session_id="s-none")
            for sid in ("s-echo", "s-shout"):
                for line in ("say:hello", "other", "say:bye"):
                    await store.append_raw(sid, "stdout", line)
                    await store.append_many(sid, echo_codec(line))

    asyncio.run(run())


@pytest.fixture
def home(chorus_home: Path) -> Path:
    populate()
    register_replay_codec("echo", lambda: echo_codec)
    register_replay_codec("shout", lambda: shouting_codec)
    return chorus_home


def test_sessions_list_on_an_empty_home(chorus_home: Path) -> None:
    result = runner.invoke(app, ["sessions", "list"])
    assert result.exit_code == 0
    assert "no sessions recorded" in result.stdout


def test_sessions_list(home: Path) -> None:
    result = runner.invoke(app, ["sessions", "list"])
    assert result.exit_code == 0
    for sid in ("s-echo", "s-shout", "s-none"):
        assert sid in result.stdout
    as_json = json.loads(runner.invoke(app, ["sessions", "list", "--json"]).stdout)
    assert [s["id"] for s in as_json] == ["s-none", "s-shout", "s-echo"]
    assert as_json[2]["last_seq"] == 3


def test_sessions_show(home: Path) -> None:
    result = runner.invoke(app, ["sessions", "show", "s-echo"])
    assert result.exit_code == 0
    assert "m1" in result.stdout
    assert "unknown" in result.stdout
    assert '"text": "bye"' in result.stdout
    document = json.loads(runner.invoke(app, ["sessions", "show", "s-echo", "--json"]).stdout)
    assert document["session"]["body"] == "echo"
    assert [e["seq"] for e in document["events"]] == [1, 2, 3]


def test_sessions_show_unknown_exits_2(home: Path) -> None:
    result = runner.invoke(app, ["sessions", "show", "nope"])
    assert result.exit_code == 2
    assert "unknown session 'nope'" in result.stderr


def test_replay_exit_codes(home: Path) -> None:
    match = runner.invoke(app, ["replay", "s-echo"])
    assert (match.exit_code, "replay matches the log" in match.stdout) == (0, True)

    diverged = runner.invoke(app, ["replay", "s-shout"])
    assert diverged.exit_code == 1
    assert "first divergence at event #0 (logged seq 1) from raw line 1" in diverged.stderr
    assert "HELLO" in diverged.stderr

    unknown = runner.invoke(app, ["replay", "nope"])
    assert (unknown.exit_code, "unknown session" in unknown.stderr) == (2, True)

    no_codec = runner.invoke(app, ["replay", "s-none"])
    assert no_codec.exit_code == 2
    assert "no replay codec registered for body 'nobody'" in no_codec.stderr
