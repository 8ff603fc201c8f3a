"""An SDK program's hooks as chorus-claude reads them (sans-I/O): which it runs, which
callbacks match a tool, and what their answers add up to."""

from __future__ import annotations

import pytest

from chorus.fronts import HookError, Hooks
from chorus.fronts._hooks import Outcome, callback_frame


def _config(**events: list[dict[str, object]]) -> dict[str, object]:
    return dict(events)


def test_the_events_chorus_runs_and_the_ones_it_refuses() -> None:
    hooks = Hooks.parse(
        _config(
            PreToolUse=[{"matcher": "Bash|Write", "hookCallbackIds": ["hook_0"], "timeout": 5}],
            PostToolUse=[{"matcher": None, "hookCallbackIds": ["hook_1", "hook_2"]}],
            Stop=[{"hookCallbackIds": ["hook_3"]}],
        )
    )
    assert hooks.callbacks("PreToolUse", "Bash") == [("hook_0", 5.0)]
    assert hooks.callbacks("PreToolUse", "Read") == []
    assert [cid for cid, _ in hooks.callbacks("PostToolUse", "Read")] == ["hook_1", "hook_2"]
    assert hooks.has("Stop")
    assert not hooks.has("UserPromptSubmit")
    assert not Hooks.parse(None)
    with pytest.raises(HookError, match="cannot run Notification, PreCompact hooks"):
        Hooks.parse(_config(PreCompact=[], Notification=[], Stop=[]))
    with pytest.raises(HookError, match="hookCallbackIds"):
        Hooks.parse(_config(Stop=[{"matcher": None}]))


def test_a_matcher_is_a_regex_or_a_name() -> None:
    hooks = Hooks.parse(
        _config(
            PreToolUse=[
                {"matcher": "mcp__probe__.*", "hookCallbackIds": ["a"]},
                {"matcher": "Bash(", "hookCallbackIds": ["b"]},  # not a regex: the name
            ]
        )
    )
    assert [cid for cid, _ in hooks.callbacks("PreToolUse", "mcp__probe__lookup")] == ["a"]
    assert [cid for cid, _ in hooks.callbacks("PreToolUse", "Bash(")] == ["b"]
    assert hooks.callbacks("PreToolUse", "Bash") == []


def test_answers_add_up_the_strictest_way() -> None:
    out = Outcome()
    allow = {"hookEventName": "PreToolUse", "permissionDecision": "allow"}
    deny = {"hookEventName": "PreToolUse", "permissionDecision": "deny"}
    out.add({"hookSpecificOutput": allow}, "PreToolUse")
    out.add({"hookSpecificOutput": deny | {"permissionDecisionReason": "no"}}, "PreToolUse")
    out.add({"hookSpecificOutput": allow}, "PreToolUse")
    assert (out.permission, out.reason) == ("deny", "no")
    old = Outcome()
    old.add({"decision": "approve"}, "PreToolUse")
    assert old.permission == "allow"
    stop = Outcome()
    stop.add({"continue": False, "stopReason": "enough"}, "PostToolUse")
    stop.add({"async": True, "decision": "block"}, "PostToolUse")  # async: not waited on
    assert (stop.stopped, stop.blocked, stop.reason) == (True, False, "enough")
    changed = Outcome()
    changed.add({"hookSpecificOutput": allow | {"updatedInput": {"command": "x"}}}, "PreToolUse")
    assert changed.changed_input
    frame = callback_frame("r1", "hook_0", {"tool_use_id": "t1", "hook_event_name": "PreToolUse"})
    assert frame["request"]["tool_use_id"] == "t1"
    assert frame["request"]["subtype"] == "hook_callback"
