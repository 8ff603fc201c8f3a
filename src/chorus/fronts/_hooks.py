"""An SDK program's hooks, as ``chorus-claude`` runs them (sans-I/O).

The Claude Agent SDK sends its hooks in ``initialize`` (``{EVENT: [{matcher,
hookCallbackIds, timeout?}]}``) and expects ``hook_callback`` control requests back.
The front runs the events it can honour on every body, through Chorus's gate:

* ``PreToolUse``: before the program's ``can_use_tool``, for each call Chorus's policy
  lets through (a deny denies, an allow skips Claude Code's ask, an ask asks);
* ``PostToolUse`` / ``PostToolUseFailure``: on each tool result (what they say back is
  steered into the turn);
* ``UserPromptSubmit``: before a prompt is sent (a block keeps it from the body;
  ``additionalContext`` is added to it);
* ``Stop``: when a turn would end (a block sends its reason as the next prompt).

Any other event is refused at ``initialize`` with an error naming it: a hook the
program relies on is never silently left out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from chorus.events import JsonDict

TOOL_EVENTS = frozenset({"PreToolUse", "PostToolUse", "PostToolUseFailure"})
SUPPORTED = TOOL_EVENTS | {"UserPromptSubmit", "Stop"}
#: Claude Code's hook timeout when the matcher gives none (seconds).
DEFAULT_TIMEOUT_S = 60.0
Permission = Literal["allow", "deny", "ask"]


class HookError(ValueError):
    """Hooks ``chorus-claude`` cannot run (the ``initialize`` answer is this error)."""


@dataclass(frozen=True)
class Matcher:
    """One matcher of one event: which tools (a regex, ``*`` or none: all) and the
    program's callbacks for them."""

    event: str
    pattern: str | None
    callback_ids: tuple[str, ...]
    timeout_s: float = DEFAULT_TIMEOUT_S

    def matches(self, tool: str | None) -> bool:
        if self.event not in TOOL_EVENTS or self.pattern in (None, "", "*"):
            return True
        pattern = str(self.pattern)
        try:
            return re.fullmatch(pattern, tool or "") is not None
        except re.error:
            return pattern == tool


@dataclass(frozen=True)
class Hooks:
    matchers: tuple[Matcher, ...] = ()

    @classmethod
    def parse(cls, config: Any) -> Hooks:
        """``initialize``'s ``hooks``; :class:`HookError` for an event Chorus cannot run
        or a malformed entry."""
        if config is None:
            return cls()
        if not isinstance(config, dict):
            raise HookError("hooks: expected an object of events")
        refused = sorted(event for event in config if event not in SUPPORTED)
        if refused:
            raise HookError(
                f"chorus-claude cannot run {', '.join(refused)} hooks (it runs "
                f"{', '.join(sorted(SUPPORTED))}): remove them or drive Claude Code itself"
            )
        return cls(tuple(_matchers(config)))

    def __bool__(self) -> bool:
        return bool(self.matchers)

    def has(self, event: str) -> bool:
        return any(m.event == event for m in self.matchers)

    def callbacks(self, event: str, tool: str | None = None) -> list[tuple[str, float]]:
        """``(callback_id, timeout_s)`` of every callback for ``event`` on ``tool``."""
        return [
            (callback_id, m.timeout_s)
            for m in self.matchers
            if m.event == event and m.matches(tool)
            for callback_id in m.callback_ids
        ]


def _matchers(config: dict[str, Any]) -> Iterable[Matcher]:
    for event, entries in config.items():
        if not isinstance(entries, list):
            raise HookError(f"hooks.{event}: expected a list of matchers")
        for entry in entries:
            ids = entry.get("hookCallbackIds") if isinstance(entry, dict) else None
            if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
                raise HookError(f"hooks.{event}: a matcher without hookCallbackIds")
            timeout = entry.get("timeout")
            yield Matcher(
                event,
                entry.get("matcher"),
                tuple(ids),
                float(timeout) if isinstance(timeout, int | float) else DEFAULT_TIMEOUT_S,
            )


def callback_frame(request_id: str, callback_id: str, given: JsonDict) -> JsonDict:
    """The ``hook_callback`` control request for one callback."""
    request: JsonDict = {"subtype": "hook_callback", "callback_id": callback_id, "input": given}
    if "tool_use_id" in given:
        request["tool_use_id"] = given["tool_use_id"]
    return {"type": "control_request", "request_id": request_id, "request": request}


@dataclass
class Outcome:
    """What the callbacks of one event said, together: the strictest permission, a
    block (``decision: block``) with its reason, a stop (``continue: false``), and
    the context to hand the model."""

    permission: Permission | None = None
    reason: str = ""
    blocked: bool = False
    stopped: bool = False
    changed_input: bool = False
    context: list[str] = field(default_factory=list)

    def add(self, answer: Any, event: str) -> None:
        """One callback's answer (a control response's ``response``)."""
        if not isinstance(answer, dict) or answer.get("async") is True:
            return
        specific = answer.get("hookSpecificOutput")
        specific = specific if isinstance(specific, dict) else {}
        reason = answer.get("reason") or specific.get("permissionDecisionReason")
        if answer.get("continue") is False:
            self.stopped = True
            reason = reason or answer.get("stopReason")
        if answer.get("decision") == "block":
            self.blocked = True
        self._permission(answer, specific, event)
        if isinstance(reason, str) and reason and not self.reason:
            self.reason = reason
        extra = specific.get("additionalContext")
        if isinstance(extra, str) and extra:
            self.context.append(extra)
        if isinstance(specific.get("updatedInput"), dict):
            self.changed_input = True

    def _permission(self, answer: JsonDict, specific: JsonDict, event: str) -> None:
        said = specific.get("permissionDecision")
        if event == "PreToolUse" and answer.get("decision") in {"approve", "block"}:
            said = "allow" if answer["decision"] == "approve" else "deny"  # the old form
        if said not in ("allow", "deny", "ask"):
            return
        rank = {"allow": 0, "ask": 1, "deny": 2}
        if self.permission is None or rank[said] > rank[self.permission]:
            self.permission = said
