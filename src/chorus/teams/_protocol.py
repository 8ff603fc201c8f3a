"""The pure parts of teams: the prompts members and the coordinator get, reading the
coordinator's plan, and reading a message file dropped into an inbox folder. No I/O."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass

from chorus.frameworks import first_json
from chorus.store import MESSAGE_KINDS, MessageRecord
from chorus.teams._config import COORDINATOR, USER, TeamConfig

#: A dropped file larger than this is rejected.
MAX_DROP_BYTES = 1 << 20


class BadPlanError(ValueError):
    """The coordinator's answer holds no usable assignment."""


class BadDropError(ValueError):
    """A dropped message file that cannot be a message (the reason is the text)."""


@dataclass(frozen=True, slots=True)
class Dropped:
    id: str
    sender: str
    kind: str
    text: str


def plan_prompt(team: TeamConfig, task: str) -> str:
    roster = "\n".join(
        f'- "{name}" ({m.body}{", " + m.role if m.role else ""})'
        for name, m in team.members.items()
    )
    return (
        f"You coordinate the team {team.name!r}. Split the task below between its members "
        "so they can work at the same time, each on its own part. Do not do the work "
        "yourself and do not change any file.\nMembers:\n"
        f"{roster}\n"
        "Answer with one JSON object and nothing else: "
        '{"assignments": [{"member": "<name>", "task": "<what this member does>"}, ...]}\n\n'
        f"Task: {task}"
    )


def parse_plan(team: TeamConfig, text: str) -> tuple[dict[str, str], list[str]]:
    """(member → assignment, notes about what was left out). Raises
    :class:`BadPlanError` when nothing usable is in ``text``."""
    data = first_json(text)
    raw = data.get("assignments") if isinstance(data, dict) else None
    pairs = _pairs(raw)
    plan: dict[str, str] = {}
    notes: list[str] = []
    for member, task in pairs:
        if member not in team.members:
            notes.append(f"the plan named {member!r}, who is not a member: left out")
        elif task.strip():
            plan[member] = f"{plan[member]}\n{task}" if member in plan else task
    if not plan:
        raise BadPlanError(
            f"the coordinator's answer has no assignment for a member: {text[:300]!r}"
        )
    return plan, notes


def _pairs(raw: object) -> list[tuple[str, str]]:
    if isinstance(raw, dict):
        return [(str(k), str(v)) for k, v in raw.items()]
    if not isinstance(raw, list):
        return []
    return [
        (str(item.get("member")), str(item.get("task") or ""))
        for item in raw
        if isinstance(item, dict)
    ]


def member_prompt(team: TeamConfig, member: str, messages: Sequence[MessageRecord]) -> str:
    """A member's turn: who it is, then the messages delivered to it, oldest first."""
    spec = team.members[member]
    role = f" Your role: {spec.role}." if spec.role else ""
    listed = "\n\n".join(_render(m) for m in messages)
    others = ", ".join(n for n in team.members if n != member) or "none"
    return (
        f"(Chorus: you are {member!r}, a member of the team {team.name!r}.{role} Other "
        f"members: {others}. Your final answer is sent to the coordinator as your result. "
        "The tools team_send, team_inbox and team_status reach your team.)\n\n"
        f"{listed}"
    )


def _render(msg: MessageRecord) -> str:
    text = str(msg.body.get("text", "")) or json.dumps(msg.body)
    return f"[{msg.kind} from {msg.sender}]\n{text}"


def steer_text(msg: MessageRecord) -> str:
    return f"(Chorus: a message reached you mid-turn.)\n{_render(msg)}"


def synthesis_prompt(task: str, results: Sequence[MessageRecord]) -> str:
    parts = "\n\n".join(
        f"--- {m.kind} from {m.sender} ({m.body.get('state', 'succeeded')}) ---\n"
        f"{m.body.get('text', '')}"
        for m in results
    )
    return (
        "You coordinate a team. Its members worked on parts of the task below; their "
        "results follow. Combine them into the final answer (and write it where the task "
        f"says, if it says).\n\nTask: {task}\n\n{parts or '(no member returned a result)'}"
    )


def read_drop(filename: str, data: bytes, senders: Sequence[str]) -> Dropped:
    """A dropped file as a message: JSON ``{"text", "kind"?, "from"?, "id"?}`` or, for
    any other file, its text (a ``status`` message from ``user``)."""
    if len(data) > MAX_DROP_BYTES:
        raise BadDropError(f"larger than {MAX_DROP_BYTES} bytes")
    try:
        text = data.decode()
    except UnicodeDecodeError as exc:
        raise BadDropError(f"not UTF-8 text ({exc.reason})") from exc
    default_id = hashlib.sha256(f"{filename}\0{text}".encode()).hexdigest()[:32]
    if not filename.endswith(".json"):
        if not text.strip():
            raise BadDropError("the file is empty")
        return Dropped(default_id, USER, "status", text.strip())
    return _json_drop(text, default_id, senders)


def _json_drop(text: str, default_id: str, senders: Sequence[str]) -> Dropped:
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise BadDropError(f"not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise BadDropError("the JSON is not an object")
    body = data.get("text")
    if not isinstance(body, str) or not body.strip():
        raise BadDropError('no "text" (a non-empty string)')
    kind = data.get("kind", "status")
    if kind not in MESSAGE_KINDS:
        raise BadDropError(f"unknown kind {kind!r} (use one of {', '.join(MESSAGE_KINDS)})")
    sender = data.get("from", USER)
    if sender not in (*senders, USER):
        raise BadDropError(f"unknown sender {sender!r} (use a member, {COORDINATOR} or {USER})")
    mid = data.get("id", default_id)
    if not isinstance(mid, str) or not mid.isalnum() or len(mid) > 64:
        raise BadDropError('"id" must be letters and digits (at most 64)')
    return Dropped(mid, str(sender), str(kind), body.strip())
