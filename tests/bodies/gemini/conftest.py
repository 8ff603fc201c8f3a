"""Replaying the recorded Gemini ACP transcripts through the real AcpCodec.

A transcript line is ``{"t", "dir", "msg"}``. Every ``client->agent`` request
is re-issued through the codec's own command (so the ids and params the codec
writes are checked against what the recorder sent), every permission answer
through :meth:`AcpCodec.answer_permission`, and every ``agent->client`` message
is fed to :meth:`AcpCodec.feed`. A second ``initialize`` starts a new process,
hence a new codec.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest

from chorus.bodies import PermissionAnswer
from chorus.bodies.acp import GEMINI_QUIRKS, AcpCodec, AcpQuirks, Inbound
from chorus.events import EVENT_TYPES, Event

TRANSCRIPTS = Path(__file__).resolve().parents[2] / "transcripts" / "gemini"
T = TypeVar("T")

#: Gemini's option ids and the Chorus answers that must select them.
ANSWERS = {
    "proceed_once": PermissionAnswer.allow(),
    "proceed_always": PermissionAnswer("allow", scope="session"),
    "cancel": PermissionAnswer.deny("rejected in the recording"),
}


@dataclass
class Replay:
    """One agent process of a transcript, replayed."""

    codec: AcpCodec
    items: list[Inbound] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def events(self) -> list[Event]:
        return [i for i in self.items if isinstance(i, EVENT_TYPES)]

    def all(self, kind: type[T]) -> list[T]:
        return [i for i in self.items if isinstance(i, kind)]


def _issue(codec: AcpCodec, msg: dict[str, Any]) -> str:
    """Re-issue a recorded client request through the codec; return the codec's line."""
    method, params = msg["method"], msg.get("params") or {}
    if method == "initialize":
        return codec.initialize(client_name=params["clientInfo"]["name"])[1]
    if method == "session/new":
        return codec.new_session(params["cwd"], params["mcpServers"])[1]
    if method == "session/load":
        return codec.load_session(params["sessionId"], params["cwd"], params["mcpServers"])[1]
    if method == "session/prompt":
        return codec.prompt(params["prompt"][0]["text"])[1]
    if method == "session/set_mode":
        return codec.set_mode(params["modeId"])[1]
    if method == "session/set_model":
        return codec.set_model(params["modelId"])[1]
    return codec.request(method, params)[1]


def _same_request(ours: dict[str, Any], recorded: dict[str, Any]) -> None:
    assert (ours["id"], ours["method"]) == (recorded["id"], recorded["method"])
    if recorded["method"] == "initialize":
        # We also advertise the SDK's default auth capability and our version.
        caps, theirs = (
            ours["params"]["clientCapabilities"],
            recorded["params"]["clientCapabilities"],
        )
        assert (caps["fs"], caps["terminal"]) == (theirs["fs"], theirs["terminal"])
        return
    assert ours["params"] == recorded["params"]


def _client_message(replay: Replay, msg: dict[str, Any]) -> None:
    codec = replay.codec
    if "method" in msg and "id" in msg:
        _same_request(json.loads(_issue(codec, msg)), msg)
    elif msg.get("method") == "session/cancel":
        assert json.loads(codec.cancel()) == msg
    elif "result" in msg and isinstance(msg["result"], dict) and "outcome" in msg["result"]:
        option = msg["result"]["outcome"]["optionId"]
        answered = codec.answer_permission(msg["id"], ANSWERS[option])
        assert answered is not None, f"no open permission request {msg['id']}"
        line, events = answered
        assert json.loads(line) == msg
        replay.items.extend(events)


def replay_file(name: str, quirks: AcpQuirks = GEMINI_QUIRKS) -> list[Replay]:
    """Replay ``name`` from the Gemini transcripts; one :class:`Replay` per process."""
    replays: list[Replay] = []
    ticks = iter(x / 10 for x in range(100_000))
    for raw in (TRANSCRIPTS / name).read_text().split("\n"):
        if not raw:
            continue
        record = json.loads(raw)
        direction, msg = record["dir"], record["msg"]
        if direction == "client->agent" and msg.get("method") == "initialize":
            replays.append(Replay(AcpCodec(body="gemini", quirks=quirks, clock=ticks.__next__)))
        if direction == "note":
            replays[-1].notes.append(msg["note"])
        elif direction == "client->agent":
            _client_message(replays[-1], msg)
        elif direction == "agent->client":
            replays[-1].items.extend(replays[-1].codec.feed(json.dumps(msg)))
    return replays


@pytest.fixture
def replay() -> Callable[..., list[Replay]]:
    if not TRANSCRIPTS.is_dir():
        pytest.skip("recorded Gemini transcripts missing")
    return replay_file
