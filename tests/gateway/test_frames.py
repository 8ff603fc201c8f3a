"""The frame parser: total over any input (hypothesis), with the documented order of
checks (size before parsing) and error codes."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from chorus.events import (
    KNOWN_SUBTYPES,
    ControlRequest,
    ControlResponse,
    KeepAlive,
    RequestBody,
    UserContent,
    UserMessage,
)
from chorus.gateway import MAX_DEPTH, GatewayCode, Rejected, RequestError, decode_frame
from chorus.gateway import known_request as typed
from chorus.gateway._frames import user_text

CAP = 2048
FRAME_TYPES = ["control_request", "control_response", "user", "keep_alive", "event", "junk"]

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=40)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=10), inner),
    max_leaves=12,
)
request_ids = st.one_of(st.text(max_size=300), st.integers(), st.none(), json_values)
request_bodies = st.one_of(
    json_values,
    st.fixed_dictionaries(
        {"subtype": st.one_of(st.sampled_from(sorted(KNOWN_SUBTYPES)), st.text(max_size=20))},
        optional={
            "model": json_values,
            "mode": json_values,
            "text": json_values,
            "last_seq": json_values,
            "max_thinking_tokens": json_values,
        },
    ),
)
frame_like = st.fixed_dictionaries(
    {"type": st.sampled_from(FRAME_TYPES)},
    optional={
        "request_id": request_ids,
        "request": request_bodies,
        "message": st.one_of(json_values, st.fixed_dictionaries({"content": json_values})),
        "response": json_values,
    },
)


def _check_total(data: str | bytes) -> Any:
    """decode_frame's contract for any input: a frame or a Rejected, never an exception."""
    result = decode_frame(data, max_bytes=CAP)
    size = len(data) if isinstance(data, bytes) else len(data.encode("utf-8", "surrogatepass"))
    if size > CAP:
        assert isinstance(result, Rejected)
        assert result.code is GatewayCode.FRAME_TOO_LARGE
    if isinstance(result, Rejected):
        assert result.code in GatewayCode
        reply = result.response()  # always a valid error response
        assert reply.response.subtype == "error"
        assert len(result.request_id) <= 256
    return result


def _typed_failure(frame: ControlRequest) -> GatewayCode | None:
    """The code typed validation fails with (it may only raise RequestError), or None."""
    try:
        typed(frame)
    except RequestError as exc:
        return exc.code
    return None


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=3 * CAP))
@example(b"\xef\xbb\xbf{}")
@example(b"\xff\xfe{\x00}\x00")
def test_any_bytes_decode_or_reject(data: bytes) -> None:
    _check_total(data)


@settings(max_examples=400, deadline=None)
@given(st.text(max_size=3 * CAP))
@example('{"a": "\\ud800"}')
@example("[" * 5000)
def test_any_text_decodes_or_rejects(data: str) -> None:
    _check_total(data)


@settings(max_examples=300, deadline=None)
@given(frame_like)
def test_frame_shaped_json_decodes_or_rejects_with_its_id(frame: dict[str, Any]) -> None:
    data = json.dumps(frame)
    result = _check_total(data)
    if isinstance(result, ControlRequest):
        assert result.request_id == frame["request_id"]
        assert _typed_failure(result) in (None, GatewayCode.INVALID_REQUEST)
    elif isinstance(result, Rejected) and len(data) <= CAP:
        rid = frame.get("request_id")
        if result.code is GatewayCode.INVALID_REQUEST and isinstance(rid, str) and rid:
            assert result.request_id == (rid if len(rid) <= 256 else "")


@settings(max_examples=200, deadline=None)
@given(
    st.text(min_size=1, max_size=64),
    st.sampled_from(sorted(KNOWN_SUBTYPES - {"initialize"})),
    st.dictionaries(st.sampled_from(["model", "mode", "text"]), st.text(max_size=20)),
)
def test_valid_requests_round_trip(request_id: str, subtype: str, fields: dict[str, str]) -> None:
    frame = ControlRequest(request_id=request_id, request=RequestBody(subtype=subtype, **fields))
    assert decode_frame(frame.model_dump_json(), max_bytes=CAP) == frame


@settings(max_examples=200, deadline=None)
@given(json_values, st.integers(min_value=1, max_value=CAP))
def test_size_is_checked_before_anything_else(value: Any, pad: int) -> None:
    data = json.dumps({"pad": "x" * (CAP + pad), "v": value})
    result = decode_frame(data, max_bytes=CAP)
    assert isinstance(result, Rejected)
    assert result.code is GatewayCode.FRAME_TOO_LARGE
    assert result.request_id == ""


# -- examples -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "code"),
    [
        ("", GatewayCode.INVALID_JSON),
        ("nope", GatewayCode.INVALID_JSON),
        ('{"x": Infinity}', GatewayCode.INVALID_JSON),
        ('"just a string"', GatewayCode.INVALID_REQUEST),
        ('{"type": "event", "seq": 1}', GatewayCode.INVALID_REQUEST),
        ('{"type": "keep_alive", "extra": 1}', GatewayCode.INVALID_REQUEST),
        ('{"k": "\\udfff"}', GatewayCode.INVALID_JSON),
        ("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), GatewayCode.INVALID_JSON),
    ],
)
def test_rejections(data: str, code: GatewayCode) -> None:
    result = decode_frame(data, max_bytes=CAP)
    assert isinstance(result, Rejected)
    assert result.code is code


def test_nesting_up_to_the_limit_is_fine() -> None:
    nested: Any = "leaf"
    for _ in range(MAX_DEPTH - 3):
        nested = [nested]
    frame = {"type": "control_request", "request_id": "d", "request": {"subtype": "x", "n": nested}}
    result = decode_frame(json.dumps(frame), max_bytes=1 << 20)
    assert isinstance(result, ControlRequest)


def test_each_inbound_frame_type_decodes() -> None:
    frames = [
        KeepAlive(),
        UserMessage(message=UserContent(content="hi")),
        ControlResponse.model_validate(
            {"response": {"subtype": "success", "request_id": "r", "response": {}}}
        ),
    ]
    for frame in frames:
        assert decode_frame(frame.model_dump_json(), max_bytes=CAP) == frame


def test_rejection_reads_the_id_of_a_malformed_response_frame() -> None:
    data = '{"type": "control_response", "response": {"request_id": "abc", "subtype": "maybe"}}'
    result = decode_frame(data, max_bytes=CAP)
    assert isinstance(result, Rejected)
    assert result.request_id == "abc"


def test_known_request_validates_fields_per_subtype() -> None:
    bad = ControlRequest(request_id="r", request=RequestBody(subtype="steer"))
    with pytest.raises(RequestError) as caught:
        typed(bad)
    assert caught.value.code is GatewayCode.INVALID_REQUEST
    assert "text" in caught.value.message
    unknown = ControlRequest(request_id="r", request=RequestBody(subtype="teleport"))
    assert typed(unknown) is None


def test_user_text_joins_text_blocks_and_refuses_the_rest() -> None:
    blocks = [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}]
    assert user_text(UserMessage(message=UserContent(content=blocks))) == "one\ntwo"
    image = [{"type": "image", "source": {}}]
    with pytest.raises(RequestError) as caught:
        user_text(UserMessage(message=UserContent(content=image)))
    assert caught.value.code is GatewayCode.UNSUPPORTED
    with pytest.raises(RequestError):
        user_text(UserMessage(message=UserContent(content="   ")))
