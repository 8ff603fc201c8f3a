"""Replay: recorded stdout re-run through a codec must reproduce the logged events."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import pytest

from chorus._errors import BodyProtocolError
from chorus.events import ControlRequestEvent, Event, Text, ToolCall, TurnCompleted, Unknown
from chorus.store import (
    ORIGIN_CHORUS,
    CodecFactory,
    NoReplayCodecError,
    ReplayCodec,
    SessionRecord,
    Store,
    UnknownSessionError,
    event_origin,
    register_replay_codec,
    replay,
)

TRANSCRIPTS = Path(__file__).resolve().parents[1] / "transcripts" / "claude"


class TinyCodec:
    """A stateful codec for the tests: ``{"say"}`` -> text, ``{"tool"}`` -> tool
    call, ``{"end"}`` -> turn completed (numbered), other JSON -> nothing, other
    text -> unknown. ``shout_from`` / ``explode_on`` make deliberately different codecs."""

    def __init__(self, shout_from: int | None = None, explode_on: str | None = None) -> None:
        self.turns = 0
        self.said = 0
        self.shout_from = shout_from
        self.explode_on = explode_on

    def __call__(self, line: str) -> list[Event]:
        try:
            msg = json.loads(line)
        except ValueError:
            return [Unknown(raw=line)]
        if self.explode_on is not None and msg.get("say") == self.explode_on:
            raise BodyProtocolError("cannot decode", line=line)
        if "say" in msg:
            return [self._text(msg["say"])]
        if "tool" in msg:
            name = msg["tool"]
            return [ToolCall(call_id=f"c{name}", tool=name, native_tool=name, input=msg)]
        if "end" in msg:
            self.turns += 1
            return [TurnCompleted(result=msg["end"], num_turns=self.turns)]
        return []

    def _text(self, said: str) -> Text:
        self.said += 1
        shout = self.shout_from is not None and self.said >= self.shout_from
        return Text(text=said.upper() if shout else said)


LINES = [
    '{"say": "hello"}',
    '{"tool": "shell", "cmd": "export OPENAI_API_KEY=plain-value-123"}',
    '{"keep_alive": true}',
    "not json at all",
    '{"say": "second"}',
    '{"say": "third"}',
    '{"end": "done"}',
]


async def record(store: Store, session_id: str, lines: Iterable[str], codec: ReplayCodec) -> None:
    """Log a session the way a live one is logged: raw line, then its events, each
    tagged with its origin (a Notice is Chorus's even when a codec decoded it)."""
    for i, line in enumerate(lines):
        await store.append_raw(session_id, "stdout", line)
        for event in codec(line):
            await store.append(session_id, event, origin=event_origin(event))
        if i == 2:  # things that are not codec output must not disturb replay
            await store.append_raw(session_id, "stderr", "a warning")
            await store.append_raw(session_id, "stdin", '{"type": "user"}')
            event = ControlRequestEvent(request_id="r1", subtype="interrupt")
            await store.append(session_id, event, origin=ORIGIN_CHORUS)


@pytest.fixture
async def recorded(store: Store, session: SessionRecord) -> str:
    await record(store, session.id, LINES, TinyCodec())
    return session.id


async def test_the_same_codec_matches(store: Store, recorded: str) -> None:
    report = await replay(store, recorded, TinyCodec)
    assert report.ok, report.describe()
    assert (report.raw_lines, report.compared) == (len(LINES), 6)
    assert "replay matches" in report.describe()


async def test_an_altered_codec_names_the_first_divergence(store: Store, recorded: str) -> None:
    report = await replay(store, recorded, lambda: TinyCodec(shout_from=2))
    divergence = report.divergence
    assert divergence is not None
    # "second": raw line n=7 (after 5 stdout lines, a stderr and a stdin line)
    assert (divergence.index, divergence.raw_n) == (3, 7)
    assert divergence.seq == 5  # seq 4 is the chorus-origin control request
    assert divergence.fields == ["text"]
    assert divergence.expected is not None
    assert divergence.got is not None
    assert (divergence.expected["text"], divergence.got["text"]) == ("second", "SECOND")
    assert "event #3 (logged seq 5) from raw line 7" in report.describe()


async def test_a_codec_that_produces_less_or_more_diverges(store: Store, recorded: str) -> None:
    def silent_end() -> ReplayCodec:
        codec = TinyCodec()
        return lambda line: [] if "end" in line else codec(line)

    fewer = await replay(store, recorded, silent_end)
    assert fewer.divergence is not None
    assert (fewer.divergence.index, fewer.divergence.got) == (5, None)
    assert fewer.divergence.expected is not None
    assert fewer.divergence.expected["type"] == "turn_completed"

    def chatty() -> ReplayCodec:
        codec = TinyCodec()
        return lambda line: [*codec(line), Text(text="extra")] if "end" in line else codec(line)

    more = await replay(store, recorded, chatty)
    assert more.divergence is not None
    assert (more.divergence.index, more.divergence.expected) == (6, None)


async def test_a_failing_codec_is_reported(store: Store, session: SessionRecord) -> None:
    await record(store, session.id, ['{"say": "a"}', '{"say": "b"}'], TinyCodec())
    report = await replay(store, session.id, lambda: TinyCodec(explode_on="b"))
    assert report.divergence is not None
    assert report.divergence.error == "cannot decode"
    assert report.divergence.raw_n == 2


async def test_codecs_are_found_by_body_name(store: Store, recorded: str) -> None:
    register_replay_codec("testbody", TinyCodec)
    assert (await replay(store, recorded)).ok
    other = await store.create_session("no-such-body")
    with pytest.raises(NoReplayCodecError):
        await replay(store, other.id)
    with pytest.raises(UnknownSessionError):
        await replay(store, "nope", TinyCodec)


def _claude_factory() -> CodecFactory:
    from chorus.bodies.claude._codec import ClaudeCodec

    return lambda: ClaudeCodec().feed


@pytest.mark.parametrize(
    "path", sorted(TRANSCRIPTS.glob("transcript_*.jsonl")), ids=lambda p: p.name
)
async def test_real_claude_transcripts_replay_with_the_claude_codec(
    store: Store, path: Path
) -> None:
    factory = _claude_factory()
    session = await store.create_session("claude")
    lines = path.read_text(encoding="utf-8").split("\n")
    await record(store, session.id, [line for line in lines if line], factory())
    report = await replay(store, session.id, factory)
    assert report.ok, report.describe()
    assert report.compared > 0


class SentEcho:
    """A duplex codec: stdout line -> Text, stdin line -> Text ``sent:<line>``."""

    def __init__(self, *, compare_text: bool = True) -> None:
        self.not_compared = frozenset() if compare_text else frozenset({"text"})

    def __call__(self, line: str) -> list[Event]:
        return [Text(text=line)]

    def sent(self, line: str) -> list[Event]:
        return [Text(text=f"sent:{line}")]


async def _duplex_session(store: Store) -> str:
    session = await store.create_session("duplex")
    await store.append_raw(session.id, "stdout", "hello")
    await store.append(session.id, Text(text="hello"))
    await store.append_raw(session.id, "stdin", "prompt")
    await store.append(session.id, Text(text="sent:prompt"))
    await store.append_raw(session.id, "stdout", "bye")
    await store.append(session.id, Text(text="bye (timed)"))
    return session.id


async def test_a_duplex_codec_reads_stdin_too_and_skips_not_compared_fields(
    store: Store,
) -> None:
    session_id = await _duplex_session(store)
    strict = await replay(store, session_id, SentEcho)
    assert not strict.ok
    assert strict.divergence is not None
    assert (strict.divergence.index, strict.divergence.fields) == (2, ["text"])
    lenient = await replay(store, session_id, lambda: SentEcho(compare_text=False))
    assert lenient.ok, lenient.describe()
    assert (lenient.raw_lines, lenient.compared) == (3, 3)


async def test_no_registered_codec_is_an_error_without_importing_bodies(
    store: Store,
) -> None:
    session = await store.create_session("no-such-body")
    with pytest.raises(NoReplayCodecError):
        await replay(store, session.id)
