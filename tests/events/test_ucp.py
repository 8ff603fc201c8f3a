"""UCP v1 frames: parsing, unknown subtypes, schema export."""

from __future__ import annotations

import json

import jsonschema
import pytest

from chorus import EventTooLargeError, InvalidEventError
from chorus.events import (
    KNOWN_REQUEST_ADAPTER,
    ControlRequest,
    EventFrame,
    KeepAlive,
    Text,
    UserMessage,
    error,
    parse_inbound,
    parse_outbound,
    success,
    ucp_json_schema,
)


def test_control_request_with_unknown_subtype_still_parses() -> None:
    frame = parse_inbound(
        '{"type":"control_request","request_id":"r1","request":{"subtype":"warp","x":1}}'
    )
    assert isinstance(frame, ControlRequest)
    assert frame.request.subtype == "warp"


def test_known_subtype_validates_into_its_model() -> None:
    req = KNOWN_REQUEST_ADAPTER.validate_python({"subtype": "set_model", "model": "opus"})
    assert req.subtype == "set_model"
    assert req.model == "opus"  # type: ignore[union-attr]


def test_user_and_keep_alive_frames() -> None:
    user = parse_inbound('{"type":"user","message":{"role":"user","content":"hi"}}')
    assert isinstance(user, UserMessage)
    assert user.message.content == "hi"
    assert isinstance(parse_inbound('{"type":"keep_alive"}'), KeepAlive)


@pytest.mark.parametrize(
    "raw",
    [
        "nope",
        '{"type":"control_request","request":{"subtype":"interrupt"}}',
        '{"type":"control_request","request_id":"r","request":{"subtype":""}}',
        '{"type":"mystery"}',
        "[1,2]",
    ],
)
def test_malformed_frames_raise_typed_errors(raw: str) -> None:
    with pytest.raises(InvalidEventError):
        parse_inbound(raw)


def test_oversized_frame() -> None:
    with pytest.raises(EventTooLargeError):
        parse_inbound('{"type":"keep_alive"}' + " " * 100, max_bytes=50)


def test_responses_round_trip_and_match_schema() -> None:
    schema = ucp_json_schema()
    frames = [
        success("r1", {"model": "x"}),
        error("r2", "Unsupported control request subtype: warp", "unsupported"),
        EventFrame(seq=7, event=Text(text="hi", seq=7)),
        KeepAlive(),
    ]
    for frame in frames:
        text = frame.model_dump_json()
        assert parse_outbound(text) == frame
        jsonschema.validate(json.loads(text), schema["outbound"])
