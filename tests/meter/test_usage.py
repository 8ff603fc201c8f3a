"""The usage parsers on the bytes the scripted model server really sends (fed whole,
and byte by byte) and on the usage shapes each API documents (cache, reasoning)."""

from __future__ import annotations

import gzip
import itertools
import json

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chorus.meter import SseSplitter, UsageReader, read_usage
from chorus.meter._sse import event_name, parse_event
from chorus.meter._usage import _SKIP, _no_usage
from chorus.testing import ModelServer
from chorus.testing._scenario import Reply, Text, Thinking
from tests.meter._streams import MODELS, STREAMED


def _recorded(api: str) -> tuple[bytes, str]:
    """One streamed answer of the scripted server: its raw bytes and content type."""
    path, body = STREAMED[api]
    reply = Reply(blocks=(Thinking(text="hmm"), Text(text="hello there", chunks=3)))
    with ModelServer([reply]) as server:
        resp = httpx.post(server.url + path, json=body)
    return resp.content, resp.headers["content-type"]


@pytest.mark.parametrize("api", ["anthropic", "openai", "gemini"])
def test_the_scripted_servers_streams_read_whole_and_byte_by_byte(api: str) -> None:
    raw, kind = _recorded(api)
    whole = read_usage(api, raw, kind)  # type: ignore[arg-type]
    reader = UsageReader(api, kind)  # type: ignore[arg-type]
    done = [reader.feed(raw[i : i + 1]) for i in range(len(raw))]
    tally = reader.close()
    assert done.count(True) == 1  # the usage completed once, at its last event
    assert tally == whole
    assert (tally.input, tally.output, tally.model, tally.done) == (100, 20, MODELS[api], True)


def test_anthropic_cache_reads_and_writes_count_as_input() -> None:
    start = {
        "type": "message_start",
        "message": {
            "model": "claude-opus-4-5",
            "usage": {
                "input_tokens": 12,
                "cache_creation_input_tokens": 300,
                "cache_read_input_tokens": 4000,
                "output_tokens": 1,
            },
        },
    }
    delta = {
        "type": "message_delta",
        "delta": {"stop_reason": "end_turn"},
        "usage": {"output_tokens": 250},
    }
    raw = _sse(
        ("message_start", start),
        ("message_delta", delta),
        ("message_stop", {"type": "message_stop"}),
    )
    tally = read_usage("anthropic", raw, "text/event-stream")
    usage = tally.usage()
    assert usage.input_tokens == 4312
    assert usage.cached_input_tokens == 4000
    assert usage.cache_write_input_tokens == 300
    assert usage.output_tokens == 250


def test_anthropic_json_answer_and_gzip() -> None:
    body = {
        "type": "message",
        "model": "claude-haiku-4-5",
        "usage": {"input_tokens": 5, "output_tokens": 7},
    }
    raw = gzip.compress(json.dumps(body).encode())
    tally = read_usage("anthropic", raw, "application/json", "gzip")
    assert (tally.input, tally.output, tally.model, tally.done) == (5, 7, "claude-haiku-4-5", True)


def test_openai_cached_and_reasoning_tokens() -> None:
    completed = {
        "type": "response.completed",
        "response": {
            "model": "gpt-5-mini",
            "usage": {
                "input_tokens": 2000,
                "input_tokens_details": {"cached_tokens": 1500},
                "output_tokens": 300,
                "output_tokens_details": {"reasoning_tokens": 200},
            },
        },
    }
    usage = read_usage("openai", _sse(("response.completed", completed)), "text/event-stream")
    assert usage.usage().model_dump() == {
        "input_tokens": 2000,
        "output_tokens": 300,
        "cached_input_tokens": 1500,
        "cache_write_input_tokens": 0,
        "reasoning_tokens": 200,
    }


def test_gemini_thoughts_count_as_output_and_a_json_array_is_read() -> None:
    chunks = [
        {
            "candidates": [{"content": {"parts": [{"text": "a"}]}}],
            "usageMetadata": {"promptTokenCount": 50},
            "modelVersion": "gemini-2.5-pro",
        },
        {
            "candidates": [{"finishReason": "STOP"}],
            "usageMetadata": {
                "promptTokenCount": 50,
                "cachedContentTokenCount": 20,
                "candidatesTokenCount": 9,
                "thoughtsTokenCount": 30,
            },
        },
    ]
    tally = read_usage("gemini", json.dumps(chunks).encode(), "application/json")
    assert (tally.input, tally.cached, tally.output, tally.reasoning) == (50, 20, 39, 30)
    assert tally.model == "gemini-2.5-pro"


def test_an_unreadable_encoding_or_no_usage_reads_nothing() -> None:
    assert read_usage("openai", b"\x00garbage", "application/json", "br").seen is False
    assert read_usage("openai", b"data: {not json}\n\n", "text/event-stream").seen is False
    error = {"error": {"message": "nope"}}
    assert read_usage("anthropic", json.dumps(error).encode(), "application/json").seen is False


def test_sse_splitter_takes_crlf_comments_and_multiline_data() -> None:
    splitter = SseSplitter()
    out = splitter.feed(b": ping\r\n\r\nevent: a\r\ndata: 1\r")
    out += splitter.feed(b"\ndata: 2\r\n\r\ndata: tail")
    assert [(e.event, e.data) for e in out] == [("a", "1\n2")]
    assert [e.data for e in splitter.close()] == ["tail"]


#: Events as the APIs send them, CRLF and LF, a comment, multi-line data, and a big one.
_STREAM = (
    b'event: message_start\r\ndata: {"a": 1}\r\n\r\n: keep-alive\n\n'
    b'event: content_block_delta\ndata: {"delta": "' + b"x" * 3000 + b'"}\n\n'
    b"data: one\ndata: two\n\nevent: message_stop\r\ndata: {}\r\n\r\ndata: tail"
)


@settings(deadline=None)  # no deadline: the machine may be loaded
@given(st.lists(st.integers(min_value=0, max_value=len(_STREAM)), max_size=30))
def test_sse_splitter_gives_the_same_events_however_the_bytes_are_cut(cuts: list[int]) -> None:
    bounds = [0, *sorted(cuts), len(_STREAM)]
    splitter = SseSplitter()
    events = [e for a, b in itertools.pairwise(bounds) for e in splitter.feed(_STREAM[a:b])]
    events += splitter.close()
    assert [(e.event, e.data[:12]) for e in events] == [
        ("message_start", '{"a": 1}'),
        ("content_block_delta", '{"delta": "x'),
        (None, "one\ntwo"),
        ("message_stop", "{}"),
        (None, "tail"),
    ]


def test_a_long_stream_of_deltas_is_read_through_to_its_usage() -> None:
    """Thousands of text deltas (passed over unparsed), then the usage."""
    delta = {"type": "response.output_text.delta", "delta": "not json: {"}
    done = {"type": "response.completed", "response": {"usage": {"input_tokens": 7}}}
    raw = _sse(*[("response.output_text.delta", delta)] * 5000, ("response.completed", done))
    reader = UsageReader("openai", "text/event-stream")
    assert [reader.feed(raw[i : i + 4096]) for i in range(0, len(raw), 4096)][-1]
    assert reader.close().input == 7


def _sse(*events: tuple[str, dict[str, object]]) -> bytes:
    return b"".join(_sse_event(n, d) for n, d in events)


def _sse_event(name: str, data: dict[str, object]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()


#: Events of each API around the ones its reader passes over unparsed: names with and
#: without a space, none at all, a name on a later line, blank lines between, CRLF, and
#: text that names usage or a usage event without being one.
_MIXED = {
    "openai": (
        b'event: response.created\ndata: {"type":"response.created","response":'
        b'{"model":"gpt-5.5"}}\n\n'
        b'event:response.output_text.delta\ndata: {"type":"response.output_text.delta",'
        b'"delta":"\\"usage\\": response.completed"}\n\n\n'
        b'event: response.output_text.delta\r\ndata: {"type":"response.output_text.delta",'
        b'"delta":"event: response.completed"}\r\n\r\n'
        b'id: 7\nevent: response.in_progress\ndata: {"type":"response.in_progress",'
        b'"response":{"model":"gpt-5.5-mini"}}\n\n\n\n'
        b'data: {"type":"response.completed","response":{"usage":{"input_tokens":9,'
        b'"input_tokens_details":{"cached_tokens":4},"output_tokens":3,'
        b'"output_tokens_details":{"reasoning_tokens":2}}}}\n\n'
    ),
    "anthropic": (
        b'event: message_start\ndata: {"type":"message_start","message":{"model":"m",'
        b'"usage":{"input_tokens":5,"cache_read_input_tokens":10}}}\n\n'
        b'event: content_block_delta\ndata: {"type":"content_block_delta","delta":'
        b'{"text":"message_delta \\"usage\\":{\\"output_tokens\\":999}"}}\n\n'
        b'event:ping\r\ndata: {"type":"ping"}\r\n\r\n\n'
        b'event: pingx\ndata: {"type":"message_delta","usage":{"output_tokens":6}}\n\n'
        b'data: {"type":"message_delta","usage":{"output_tokens":7}}\n\n'
        b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
    ),
}


def _every_event(api: str, raw: bytes) -> list[tuple[str | None, str]]:
    """The events a reader must look at: each one, by the exact check of its name."""
    splitter = SseSplitter()
    blocks = splitter.blocks(raw)
    kept = [b for b in blocks if not _no_usage(api, event_name(b))]  # type: ignore[arg-type]
    return [(e.event, e.data) for b in kept if (e := parse_event(b)) is not None]


@pytest.mark.parametrize("api", ["openai", "anthropic"])
@settings(deadline=None, max_examples=60)
@given(cuts=st.lists(st.integers(min_value=0, max_value=2000), max_size=25))
def test_events_passed_over_unparsed_are_only_those_that_never_carry_usage(
    api: str, cuts: list[int]
) -> None:
    raw = _MIXED[api]
    bounds = [0, *sorted(c % (len(raw) + 1) for c in cuts), len(raw)]
    splitter = SseSplitter(_SKIP[api])  # type: ignore[index]
    blocks = [b for a, z in itertools.pairwise(bounds) for b in splitter.blocks(raw[a:z])]
    kept = [b for b in blocks if not _no_usage(api, event_name(b))]  # type: ignore[arg-type]
    parsed = [(e.event, e.data) for b in kept if (e := parse_event(b)) is not None]
    assert parsed == _every_event(api, raw)


def test_usage_split_across_chunks_nameless_or_named_in_text_is_read_exactly() -> None:
    openai = UsageReader("openai", "text/event-stream")
    raw = _MIXED["openai"]
    assert [openai.feed(raw[i : i + 7]) for i in range(0, len(raw), 7)].count(True) == 1
    tally = openai.close()
    assert (tally.model, tally.input, tally.cached, tally.output, tally.reasoning) == (
        "gpt-5.5-mini",
        9,
        4,
        3,
        2,
    )
    anthropic = read_usage("anthropic", _MIXED["anthropic"], "text/event-stream")
    # the delta's text that looks like usage is not read; a nameless delta and one
    # named otherwise are
    assert (anthropic.input, anthropic.cached, anthropic.output, anthropic.done) == (
        15,
        10,
        7,
        True,
    )


def test_a_long_stream_read_in_big_chunks_skips_its_deltas_in_one_search() -> None:
    delta = b'event: response.output_text.delta\ndata: {"delta":"x"}\n\n' * 2000
    done = {"type": "response.completed", "response": {"usage": {"output_tokens": 5}}}
    splitter = SseSplitter(_SKIP["openai"])
    assert splitter.blocks(delta) == []
    assert splitter.blocks(delta[:-30]) == []  # an event under way: waits
    [block] = splitter.blocks(delta[-30:] + _sse_event("response.completed", done))
    assert event_name(block) == "response.completed"
