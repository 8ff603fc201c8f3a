"""Secrets stay home, as a codec: known values hidden in a request body, and the
placeholders of the hidden names restored in the model's tool-call arguments however
the answer's bytes are split (a placeholder cut over two deltas, an event cut over two
chunks); the model's text keeps them; names never hidden are never restored."""

from __future__ import annotations

import itertools
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from chorus.meter import ArgStream, Restorer, SecretBook, restore
from chorus.meter._sse import SseSplitter

TOKEN = 'tok-3f9a"c\\e81'  # a quote and a backslash: JSON escapes both
BOOK = SecretBook({"API_TOKEN": TOKEN, "DB_PASS": "hunter22", "short": "abc"})
HIDDEN = {"API_TOKEN": TOKEN, "DB_PASS": "hunter22"}


def test_values_in_a_json_body_are_hidden_and_named() -> None:
    body = json.dumps(
        {"messages": [{"content": f"the file says {TOKEN} and hunter22"}], "n": 1}
    ).encode()
    out, hidden = BOOK.hide(body)
    assert hidden == HIDDEN
    assert TOKEN.encode() not in out
    assert b"hunter22" not in out
    assert json.dumps(TOKEN)[1:-1].encode() not in out
    text = json.loads(out)["messages"][0]["content"]
    assert text == "the file says [SECRET:API_TOKEN] and [SECRET:DB_PASS]"


def test_a_body_without_secrets_passes_byte_for_byte_and_short_values_are_not_secrets() -> None:
    body = b'{"a" : "abc",  "b": "nothing here"}'
    assert BOOK.hide(body) == (body, {})
    assert "short" not in BOOK.values


def test_a_body_that_is_not_json_is_hidden_by_bytes() -> None:
    out, hidden = BOOK.hide(b"raw hunter22 raw")
    assert (out, hidden) == (b"raw [SECRET:DB_PASS] raw", {"DB_PASS": "hunter22"})


def test_plain_values_are_hidden_in_the_body_as_sent_not_re_encoded() -> None:
    """Values no JSON encoder escapes are replaced in the bytes themselves: the rest
    of the body goes as the CLI wrote it (its spacing, its escapes)."""
    book = SecretBook({"DB_PASS": "hunter22", "KEY": "sk-ant-api03-Xy_z9+Q="})
    body = b'{"a" : "hunter22 \\u00e9 sk-ant-api03-Xy_z9+Q=",  "b": ["hunter22"]}'
    out, hidden = book.hide(body)
    assert hidden == {"DB_PASS": "hunter22", "KEY": "sk-ant-api03-Xy_z9+Q="}
    assert out == b'{"a" : "[SECRET:DB_PASS] \\u00e9 [SECRET:KEY]",  "b": ["[SECRET:DB_PASS]"]}'


def test_a_value_an_encoder_may_escape_otherwise_is_found_however_escaped() -> None:
    """A value with a ``/`` (escaped ``\\/`` by some encoders) or ``<`` (``\\u003c`` by
    Go's) is hidden in its every escape once one form of it is in the body."""
    value = "https://user:pw<99>@host"
    book = SecretBook({"URL": value})
    odd = value.replace("/", "\\/").replace("<", "\\u003c").replace(">", "\\u003e")
    body = ('{"x": "' + value + '", "y": "' + odd + '"}').encode()
    out, hidden = book.hide(body)
    assert hidden == {"URL": value}
    assert json.loads(out) == {"x": "[SECRET:URL]", "y": "[SECRET:URL]"}


def test_only_hidden_names_are_restored_json_escaped_in_arguments() -> None:
    text = '{"cmd": "echo [SECRET:API_TOKEN] [SECRET:OTHER] [SECRET:DB_PASS"}'
    back = json.loads(restore(text, {"API_TOKEN": TOKEN}, escape=True))
    assert back["cmd"] == f"echo {TOKEN} [SECRET:OTHER] [SECRET:DB_PASS"


# -- split-safety -------------------------------------------------------------------------

_pieces = st.lists(
    st.one_of(
        st.sampled_from(
            ["[SECRET:API_TOKEN]", "[SECRET:DB_PASS]", "[SECRET:NOPE]", "[", "[SECRET:"]
        ),
        st.text(alphabet='ab [SECRET:]_"\\', max_size=12),
    ),
    max_size=12,
)


def _splits(text: str, cuts: list[int]) -> list[str]:
    points = sorted({c % (len(text) + 1) for c in cuts})
    bounds = [0, *points, len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds)]


@settings(max_examples=400, deadline=None)  # no deadline: the machine may be loaded
@given(_pieces, st.lists(st.integers(min_value=0), max_size=8), st.booleans())
def test_an_argument_stream_restores_like_the_whole_text_however_split(
    pieces: list[str], cuts: list[int], escape: bool
) -> None:
    text = "".join(pieces)
    stream = ArgStream(HIDDEN, escape)
    out = "".join(stream.feed(part) for part in _splits(text, cuts)) + stream.flush()
    assert out == restore(text, HIDDEN, escape=escape)


def _anthropic_stream(args: str, parts: list[str], words: str) -> bytes:
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": {"model": "m", "content": []}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": words}},
        {"type": "content_block_stop", "index": 0},
        {
            "type": "content_block_start",
            "index": 1,
            "content_block": {"type": "tool_use", "id": "t", "name": "Bash", "input": {}},
        },
        *(
            {
                "type": "content_block_delta",
                "index": 1,
                "delta": {"type": "input_json_delta", "partial_json": p},
            }
            for p in parts
        ),
        {"type": "content_block_stop", "index": 1},
        {"type": "message_stop"},
    ]
    assert "".join(parts) == args
    return b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)


def _feed(restorer: Restorer, raw: bytes, cuts: list[int]) -> bytes:
    points = sorted({c % (len(raw) + 1) for c in cuts})
    bounds = [0, *points, len(raw)]
    out = b"".join(restorer.feed(raw[a:b]) for a, b in itertools.pairwise(bounds))
    return out + restorer.close()


def _data(raw: bytes) -> list[dict[str, Any]]:
    splitter = SseSplitter()
    return [json.loads(e.data) for e in [*splitter.feed(raw), *splitter.close()]]


@settings(max_examples=300, deadline=None)  # no deadline: the machine may be loaded
@given(
    st.lists(st.integers(min_value=0), max_size=10), st.lists(st.integers(min_value=0), max_size=10)
)
def test_an_anthropic_stream_gets_the_value_in_its_tool_input_not_in_its_text(
    arg_cuts: list[int], byte_cuts: list[int]
) -> None:
    args = json.dumps({"command": "echo [SECRET:API_TOKEN] > out.txt"})
    words = "I will write [SECRET:API_TOKEN] to the file"
    raw = _anthropic_stream(args, _splits(args, arg_cuts), words)
    out = _feed(Restorer("anthropic", HIDDEN, streaming=True), raw, byte_cuts)
    events = _data(out)
    partial = "".join(
        e["delta"]["partial_json"]
        for e in events
        if e.get("delta", {}).get("type") == "input_json_delta"
    )
    assert json.loads(partial) == {"command": f"echo {TOKEN} > out.txt"}
    text = "".join(
        e["delta"]["text"] for e in events if e.get("delta", {}).get("type") == "text_delta"
    )
    assert text == words  # the model's text keeps the placeholder
    assert events[-2]["type"] == "content_block_stop"
    assert events[-1]["type"] == "message_stop"


def test_a_stream_without_placeholders_passes_byte_for_byte() -> None:
    args = json.dumps({"command": "ls"})
    raw = _anthropic_stream(args, [args[:5], args[5:]], "hello")
    assert _feed(Restorer("anthropic", HIDDEN, streaming=True), raw, [7, 100, 333]) == raw


@settings(max_examples=200, deadline=None)  # no deadline: the machine may be loaded
@given(
    st.lists(st.integers(min_value=0), max_size=10), st.lists(st.integers(min_value=0), max_size=10)
)
def test_an_openai_stream_restores_deltas_the_done_event_and_the_item(
    arg_cuts: list[int], byte_cuts: list[int]
) -> None:
    args = json.dumps({"command": ["bash", "-lc", "echo [SECRET:DB_PASS] > f"]})
    item = {"type": "function_call", "id": "fc", "call_id": "c", "name": "shell", "arguments": args}
    events: list[dict[str, Any]] = [
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {**item, "arguments": ""},
        },
        *(
            {
                "type": "response.function_call_arguments.delta",
                "item_id": "fc",
                "output_index": 0,
                "delta": p,
            }
            for p in _splits(args, arg_cuts)
        ),
        {
            "type": "response.function_call_arguments.done",
            "item_id": "fc",
            "output_index": 0,
            "arguments": args,
        },
        {"type": "response.output_item.done", "output_index": 0, "item": item},
        {"type": "response.completed", "response": {"object": "response", "output": [item]}},
    ]
    raw = b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)
    out = _data(_feed(Restorer("openai", {"DB_PASS": "hunter22"}, streaming=True), raw, byte_cuts))
    want = {"command": ["bash", "-lc", "echo hunter22 > f"]}
    deltas = "".join(e["delta"] for e in out if e["type"].endswith("arguments.delta"))
    assert json.loads(deltas) == want
    done = [e for e in out if e["type"].endswith("arguments.done")]
    assert json.loads(done[0]["arguments"]) == want
    items = [e["item"] for e in out if e["type"] == "response.output_item.done"]
    assert json.loads(items[0]["arguments"]) == want
    assert json.loads(out[-1]["response"]["output"][0]["arguments"]) == want


def test_gemini_function_call_args_are_restored_in_a_stream_and_in_json() -> None:
    chunk = {
        "candidates": [
            {
                "content": {
                    "parts": [
                        {"text": "see [SECRET:DB_PASS]"},
                        {
                            "functionCall": {
                                "name": "run_shell_command",
                                "args": {"command": "echo [SECRET:DB_PASS]"},
                            }
                        },
                    ]
                }
            }
        ]
    }
    raw = f"data: {json.dumps(chunk)}\r\n\r\n".encode()
    for streaming, body in ((True, raw), (False, json.dumps([chunk]).encode())):
        out = _feed(Restorer("gemini", {"DB_PASS": "hunter22"}, streaming=streaming), body, [3, 50])
        data = _data(out)[0] if streaming else json.loads(out)[0]
        parts = data["candidates"][0]["content"]["parts"]
        assert parts[1]["functionCall"]["args"] == {"command": "echo hunter22"}
        assert parts[0]["text"] == "see [SECRET:DB_PASS]"


def test_a_whole_anthropic_message_has_its_tool_input_restored() -> None:
    message = {
        "type": "message",
        "content": [
            {"type": "text", "text": "[SECRET:DB_PASS]"},
            {
                "type": "tool_use",
                "id": "t",
                "name": "Bash",
                "input": {"command": "x [SECRET:DB_PASS]"},
            },
        ],
    }
    out = json.loads(
        _feed(
            Restorer("anthropic", {"DB_PASS": "hunter22"}, streaming=False),
            json.dumps(message).encode(),
            [9],
        )
    )
    assert out["content"][1]["input"] == {"command": "x hunter22"}
    assert out["content"][0]["text"] == "[SECRET:DB_PASS]"
