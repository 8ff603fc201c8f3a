"""The control router: responses matched by id, deadlines, crash propagation."""

from __future__ import annotations

import asyncio

import pytest

from chorus import BodyCrashedError, BodyTimeoutError, UnsupportedControlError
from chorus.bodies.claude import ControlRequestError, ControlRouter
from chorus.events import ControlResponseEvent, ErrorCode, ErrorInfo


def _error(
    request_id: str, code: ErrorCode, native: dict[str, str] | None = None
) -> ControlResponseEvent:
    info = ErrorInfo(code=code, message="refused", native=native)
    return ControlResponseEvent(request_id=request_id, ok=False, error=info)


async def test_response_reaches_its_waiter_only() -> None:
    router = ControlRouter("claude")
    first, second = router.expect("req_1"), router.expect("req_2")
    assert router.resolve(ControlResponseEvent(request_id="req_2", ok=True, payload={"n": 2}))
    assert await router.wait("req_2", second, "set_model", 1.0) == {"n": 2}
    assert not first.done()
    assert router.pending == 1


async def test_unknown_or_late_response_is_reported_unmatched() -> None:
    router = ControlRouter("claude")
    assert not router.resolve(ControlResponseEvent(request_id="nobody", ok=True))


async def test_deadline_raises_timeout_and_forgets_the_request() -> None:
    router = ControlRouter("claude")
    future = router.expect("req_1")
    with pytest.raises(BodyTimeoutError, match="interrupt"):
        await router.wait("req_1", future, "interrupt", 0.05)
    assert router.pending == 0
    assert not router.resolve(ControlResponseEvent(request_id="req_1", ok=True))


async def test_error_answers_raise_typed_errors() -> None:
    router = ControlRouter("claude")
    unsupported = router.expect("req_1")
    router.resolve(_error("req_1", ErrorCode.UNSUPPORTED))
    with pytest.raises(UnsupportedControlError):
        await router.wait("req_1", unsupported, "no_such", 1.0)
    failed = router.expect("req_2")
    router.resolve(_error("req_2", ErrorCode.INVALID_REQUEST, {"error_code": "bad_mode"}))
    with pytest.raises(ControlRequestError) as caught:
        await router.wait("req_2", failed, "set_permission_mode", 1.0)
    assert (caught.value.subtype, caught.value.error_code) == ("set_permission_mode", "bad_mode")


async def test_fail_all_wakes_waiters_and_fails_later_requests() -> None:
    router = ControlRouter("claude")
    future = router.expect("req_1")
    waiter = asyncio.create_task(router.wait("req_1", future, "initialize", 5.0))
    await asyncio.sleep(0)
    crash = BodyCrashedError("gone", exit_code=1, stderr_tail="boom")
    router.fail_all(crash)
    with pytest.raises(BodyCrashedError):
        await waiter
    with pytest.raises(BodyCrashedError):
        await router.wait("req_2", router.expect("req_2"), "interrupt", 5.0)
