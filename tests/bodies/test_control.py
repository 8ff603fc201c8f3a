"""The request router every body uses: answers matched by id, deadlines, crash propagation."""

from __future__ import annotations

import asyncio

import pytest

from chorus import BodyCrashedError, BodyTimeoutError
from chorus.bodies._control import RequestRouter


async def test_answer_reaches_its_waiter_only() -> None:
    router = RequestRouter[str]("claude")
    first, second = router.expect("req_1"), router.expect(2)
    assert router.resolve(2, "two")
    assert await router.wait(2, second, "set_model", 1.0) == "two"
    assert not first.done()
    assert router.pending == 1


async def test_unknown_or_late_answer_is_reported_unmatched() -> None:
    router = RequestRouter[str]("codex")
    assert not router.resolve("nobody", "x")


async def test_deadline_raises_timeout_naming_the_request_and_forgets_it() -> None:
    router = RequestRouter[str]("acp")
    future = router.expect(7)
    with pytest.raises(BodyTimeoutError, match=r"acp: no answer to session/prompt \(7\)"):
        await router.wait(7, future, "session/prompt", 0.05)
    assert router.pending == 0
    assert not router.resolve(7, "late")


async def test_fail_all_wakes_waiters_and_fails_later_requests() -> None:
    router = RequestRouter[str]("claude")
    future = router.expect("req_1")
    waiter = asyncio.create_task(router.wait("req_1", future, "initialize", 5.0))
    await asyncio.sleep(0)
    router.fail_all(BodyCrashedError("gone", exit_code=1, stderr_tail="boom"))
    with pytest.raises(BodyCrashedError):
        await waiter
    assert router.failed
    with pytest.raises(BodyCrashedError):
        await router.wait("req_2", router.expect("req_2"), "interrupt", 5.0)


async def test_call_writes_after_registering_so_a_fast_answer_is_not_lost() -> None:
    router = RequestRouter[str]("codex")

    async def send_and_answer_at_once() -> None:
        assert router.pending == 1
        router.resolve(1, "fast")

    assert await router.call(1, send_and_answer_at_once, "initialize", 1.0) == "fast"


async def test_call_whose_write_fails_unregisters_and_raises_the_write_error() -> None:
    router = RequestRouter[str]("codex")

    async def broken_pipe() -> None:
        raise BodyCrashedError("stdin closed", exit_code=None, stderr_tail="")

    with pytest.raises(BodyCrashedError, match="stdin closed"):
        await router.call(1, broken_pipe, "turn/start", 1.0)
    assert router.pending == 0
