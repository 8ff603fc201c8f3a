"""The active job's plan reaches the context of a body started for the job:
on failover, the plan the first body made is the last section of the next body's
context (the consensus framework's plan is checked in test_frameworks_e2e)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest

from chorus.events import Handoff, JobEnded, Plan
from chorus.testing import error, text, tool_call

if TYPE_CHECKING:
    from conftest import Daemon

pytestmark = pytest.mark.e2e

ROUTER = """[router]
bodies = ["gemini-headless", "claude"]
cooldown_base_s = 1.0
cooldown_max_s = 2.0
rate_limit_retries = 0
notify_on_failover = false
"""
TODOS = {
    "todos": [
        {"description": "create one.txt", "status": "completed"},
        {"description": "create two.txt", "status": "pending"},
    ]
}


def test_a_failover_puts_the_first_bodys_plan_in_the_next_bodys_context(
    daemon_with: Callable[..., Daemon],
) -> None:
    chorus = daemon_with(ROUTER)
    server = chorus.server
    server.script([tool_call("write_todos", TODOS), error("quota", times=None)], lane="gemini")
    server.script([text("finished the rest")], lane="claude")
    events = chorus.ask("make one.txt and two.txt", "--body", "gemini-headless")
    assert any(isinstance(e, Plan) for e in events)
    handoffs = [e for e in events if isinstance(e, Handoff)]
    assert [(h.from_body, h.to_body) for h in handoffs] == [("gemini-headless", "claude")]
    ended = events[-1]
    assert isinstance(ended, JobEnded)
    assert ended.state == "succeeded"
    context = json.dumps(server.turn_requests(lane="claude")[0].body["system"])
    plan_at = context.index("## Plan of the active job")
    assert context.index("[pending] create two.txt", plan_at) > plan_at
    assert "## " not in context[plan_at + 2 :]  # the last section
