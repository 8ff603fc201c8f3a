"""Claude control answers -> payloads or typed errors (router: tests/bodies/test_control.py)."""

from __future__ import annotations

import pytest

from chorus import UnsupportedControlError
from chorus.bodies.claude import ControlRequestError, control_payload
from chorus.events import ControlResponseEvent, ErrorCode, ErrorInfo


def _error(
    request_id: str, code: ErrorCode, native: dict[str, str] | None = None
) -> ControlResponseEvent:
    info = ErrorInfo(code=code, message="refused", native=native)
    return ControlResponseEvent(request_id=request_id, ok=False, error=info)


def test_success_answer_is_its_payload() -> None:
    answer = ControlResponseEvent(request_id="req_2", ok=True, payload={"n": 2})
    assert control_payload("claude", "set_model", answer) == {"n": 2}


def test_unknown_subtype_raises_unsupported() -> None:
    with pytest.raises(UnsupportedControlError, match="no_such"):
        control_payload("claude", "no_such", _error("req_1", ErrorCode.UNSUPPORTED))


def test_other_error_answers_raise_control_request_error() -> None:
    answer = _error("req_2", ErrorCode.INVALID_REQUEST, {"error_code": "bad_mode"})
    with pytest.raises(ControlRequestError) as caught:
        control_payload("claude", "set_permission_mode", answer)
    assert (caught.value.subtype, caught.value.error_code) == ("set_permission_mode", "bad_mode")
