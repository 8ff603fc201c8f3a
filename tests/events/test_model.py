"""The canonical event model: JSON round trip, schema validity, typed errors."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import jsonschema
import pytest

from chorus import EventTooLargeError, InvalidEventError
from chorus.events import (
    EVENT_TYPES,
    ErrorCode,
    ErrorInfo,
    Event,
    PlanEntry,
    Usage,
    event_json_schema,
    event_to_json,
    parse_event,
)

_ERR = ErrorInfo(code=ErrorCode.QUOTA_EXHAUSTED, message="quota", retry_after_s=3.5)
# The required fields of each event type, with realistic values.
_REQUIRED: dict[str, dict[str, Any]] = {
    "text_delta": {"text": "hel"},
    "text": {"text": "hello"},
    "thinking": {"text": "pondering", "delta": True},
    "tool_call": {"call_id": "c1", "tool": "shell", "native_tool": "Bash", "input": {"a": 1}},
    "tool_output_delta": {"call_id": "c1", "text": "line\n"},
    "tool_result": {"call_id": "c1", "output": "ok", "exit_code": 0},
    "file_change": {"path": "/x/notes.txt", "kind": "add", "diff": "+x"},
    "permission_request": {"request_id": "r", "tool": "shell", "native_tool": "Bash"},
    "permission_decision": {"request_id": "r", "decision": "deny", "reason": "no"},
    "plan": {"entries": [PlanEntry(content="step", status="done")]},
    "usage": {"usage": Usage(input_tokens=5, output_tokens=2), "cost_usd": 0.01},
    "metered": {"api": "openai", "model": "gpt-5", "usage": Usage(input_tokens=9), "status": 200},
    "retry_notice": {"attempt": 1, "max_retries": 10, "delay_ms": 500, "error": _ERR},
    "status": {"state": "running"},
    "turn_completed": {"result": "done", "usage": Usage(input_tokens=1)},
    "turn_failed": {"error": _ERR},
    "steer": {"text": "also do y"},
    "queued": {"text": "next", "position": 1},
    "flag": {"name": "review", "text": "look"},
    "notice": {"message": "resumed"},
    "compatibility_warning": {"control": "steer", "message": "emulated"},
    "control_request": {"request_id": "r", "subtype": "interrupt"},
    "control_response": {"request_id": "r", "ok": True},
    "handoff": {"from_body": "claude", "to_body": "codex", "reason": _ERR},
    "worktree": {"action": "created", "path": "/w/j1", "branch": "chorus/j1-x"},
    "routed": {"to_body": "gemini", "reason": "first healthy body for structured_execution"},
    "session_ended": {"reason": "closed", "exit_code": 0},
    "job_ended": {"state": "failed", "error": _ERR, "attempts": 2},
    "memory": {"op": "add", "item_id": "m1", "kind": "fact", "text": "uses uv"},
    "unknown": {"raw": '{"type":"brand_new"}', "native_type": "brand_new"},
    "session_started": {"model": "m", "tools": ["Bash"]},
}


def _instances() -> list[Event]:
    out = []
    for cls in EVENT_TYPES:
        type_name = cls.model_fields["type"].default
        out.append(cls(session_id="s1", seq=3, body="claude", **_REQUIRED[type_name]))
    return out  # type: ignore[return-value]


def test_every_event_type_has_a_sample() -> None:
    assert {c.model_fields["type"].default for c in EVENT_TYPES} == set(_REQUIRED)


@pytest.mark.parametrize("event", _instances(), ids=lambda e: e.type)
def test_round_trip_and_schema(event: Event) -> None:
    text = event_to_json(event)
    assert parse_event(text) == event
    jsonschema.validate(json.loads(text), event_json_schema())


def test_events_are_frozen() -> None:
    event = _instances()[0]
    with pytest.raises(ValueError, match="frozen"):
        event.seq = 9  # type: ignore[misc]


def test_stamp_fills_session_and_seq() -> None:
    event = _instances()[1].stamp(session_id="abc", seq=42, body="codex")
    assert (event.session_id, event.seq, event.body) == ("abc", 42, "codex")


def test_wrong_type_is_a_typed_error() -> None:
    with pytest.raises(InvalidEventError, match="text"):
        parse_event('{"type": "text", "text": 5}')


def test_missing_field_is_a_typed_error() -> None:
    with pytest.raises(InvalidEventError, match="call_id"):
        parse_event('{"type": "tool_call", "tool": "shell", "native_tool": "Bash"}')


def test_unknown_type_and_garbage_are_typed_errors() -> None:
    with pytest.raises(InvalidEventError):
        parse_event('{"type": "no_such_event"}')
    with pytest.raises(InvalidEventError):
        parse_event("not json at all")


def test_oversized_payload_is_refused_before_parsing() -> None:
    big = json.dumps({"type": "text", "text": "x" * 2000})
    with pytest.raises(EventTooLargeError) as info:
        parse_event(big, max_bytes=1000)
    assert info.value.limit == 1000
    assert info.value.size == len(big)


def test_extra_fields_are_refused() -> None:
    with pytest.raises(InvalidEventError, match="sneaky"):
        parse_event('{"type": "text", "text": "a", "sneaky": 1}')


# Events of unique ids parsed in a fresh process (pydantic-core's string cache is
# process-wide): the Python blocks still allocated after, per event.
_KEPT = """
import gc, sys, uuid
from pydantic import ConfigDict, TypeAdapter
from chorus.events import Event, event_to_json, parse_event
from chorus.events._model import Text
adapter = TypeAdapter(Event, config=ConfigDict(cache_strings="all"))
parse = parse_event if sys.argv[1] == "ours" else adapter.validate_json
def one():
    ids = {"session_id": uuid.uuid4().hex, "job_id": uuid.uuid4().hex[:12]}
    parse(event_to_json(Text(text="hello", body="fake", **ids)))
one()
gc.collect()
before = sys.getallocatedblocks()
for _ in range(2000):
    one()
gc.collect()
print((sys.getallocatedblocks() - before) / 2000)
"""


def _kept_per_event(parser: str) -> float:
    done = subprocess.run(
        [sys.executable, "-c", _KEPT, parser], capture_output=True, text=True, check=True
    )
    return float(done.stdout)


def test_events_read_back_leave_nothing_behind_in_the_string_cache() -> None:
    assert _kept_per_event("ours") < 0.05  # keys only: nothing kept per event
    assert _kept_per_event("values too") > 1.5  # the ids: what each job's events kept
