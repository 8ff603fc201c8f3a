"""A team's config file, ``CHORUS_HOME/teams/NAME/config.toml`` (pydantic-checked),
and where its files live: ``inboxes/MEMBER/`` (the drop folders), ``inboxes/
MEMBER.jsonl`` (the readable view), ``sessions.json`` (the members' sessions)."""

from __future__ import annotations

import json
import os
import re
import time
import tomllib
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from chorus._errors import NotFoundError, UserError
from chorus.config import chorus_home

#: Names the mailbox uses itself: no member may take them.
COORDINATOR = "coordinator"
USER = "user"
RESERVED = (COORDINATOR, USER, "chorus")

_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,39}")


class TeamError(UserError):
    """A team command that cannot be done as asked (exit code 2, nothing written)."""


class UnknownTeamError(TeamError, NotFoundError):
    def __init__(self, name: str) -> None:
        known = ", ".join(list_teams()) or "none yet"
        super().__init__(
            f"unknown team {name!r} (teams: {known}); create it with `chorus team create`"
        )


def check_name(value: str, what: str) -> str:
    if not _NAME.fullmatch(value):
        raise ValueError(f"bad {what} {value!r}: use a-z, 0-9, '_' or '-' (at most 40)")
    return value


class Member(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    body: str
    role: str = ""


class TeamConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    coordinator: str = "claude"
    persistent: bool = False
    created_at: float = Field(default_factory=time.time)
    members: dict[str, Member]

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return check_name(value, "team name")

    @field_validator("members")
    @classmethod
    def _members(cls, value: dict[str, Member]) -> dict[str, Member]:
        if not value:
            raise ValueError("a team needs at least one member")
        for name in value:
            check_name(name, "member name")
            if name in RESERVED:
                raise ValueError(f"{name!r} is reserved; name the member otherwise")
        return value

    @property
    def mailbox_names(self) -> list[str]:
        """Every name a message may be addressed to: the members and the coordinator."""
        return sorted([*self.members, COORDINATOR])

    def body_of(self, name: str) -> str:
        if name == COORDINATOR:
            return self.coordinator
        return self.members[name].body

    def check_member(self, name: str, *, coordinator: bool = True) -> str:
        allowed = self.mailbox_names if coordinator else sorted(self.members)
        if name not in allowed:
            raise TeamError(
                f"team {self.name!r} has no member {name!r} (members: {', '.join(allowed)})"
            )
        return name


def teams_dir() -> Path:
    return chorus_home() / "teams"


def team_dir(name: str) -> Path:
    return teams_dir() / name


def inbox_dir(team: str, member: str) -> Path:
    return team_dir(team) / "inboxes" / member


def inbox_view(team: str, member: str) -> Path:
    return team_dir(team) / "inboxes" / f"{member}.jsonl"


def parse_members(pairs: list[str]) -> dict[str, Member]:
    """``["security=claude", "perf=gemini:performance"]`` → members (``:role`` optional)."""
    members: dict[str, Member] = {}
    for pair in pairs:
        name, sep, rest = pair.partition("=")
        if not sep or not name or not rest:
            raise TeamError(f"bad --member {pair!r}: use NAME=BODY (e.g. security=claude)")
        body, _, role = rest.partition(":")
        if name in members:
            raise TeamError(f"member {name!r} is given twice")
        members[name] = Member(body=body, role=role)
    return members


def build(name: str, members: dict[str, Member], coordinator: str, persistent: bool) -> TeamConfig:
    try:
        return TeamConfig(
            name=name, members=members, coordinator=coordinator, persistent=persistent
        )
    except ValidationError as exc:
        raise TeamError(_first_error(exc)) from exc


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"])
    return f"bad team config ({where}): {err['msg']}"


def load_team(name: str) -> TeamConfig:
    path = team_dir(name) / "config.toml"
    if not _NAME.fullmatch(name) or not path.is_file():
        raise UnknownTeamError(name)
    try:
        return TeamConfig.model_validate(tomllib.loads(path.read_text()))
    except (tomllib.TOMLDecodeError, ValidationError) as exc:
        raise TeamError(f"{path}: {exc}") from exc


def list_teams() -> list[str]:
    root = teams_dir()
    if not root.is_dir():
        return []
    return sorted(p.parent.name for p in root.glob("*/config.toml"))


def to_toml(team: TeamConfig) -> str:
    lines = [
        f"name = {json.dumps(team.name)}",
        f"coordinator = {json.dumps(team.coordinator)}",
        f"persistent = {'true' if team.persistent else 'false'}",
        f"created_at = {team.created_at!r}",
    ]
    for name, member in team.members.items():
        lines += ["", f"[members.{name}]", f"body = {json.dumps(member.body)}"]
        lines.append(f"role = {json.dumps(member.role)}")
    return "\n".join(lines) + "\n"


def save_team(team: TeamConfig) -> Path:
    """Write the config atomically and make the drop folders."""
    folder = team_dir(team.name)
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    for member in team.mailbox_names:
        (inbox_dir(team.name, member) / "rejected").mkdir(parents=True, exist_ok=True)
    path = folder / "config.toml"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(to_toml(team))
    os.replace(tmp, path)
    return path


def remove_team(name: str) -> None:
    """Forget the team's config and sessions; its inboxes stay (the readable history)."""
    for file in ("config.toml", "sessions.json"):
        (team_dir(name) / file).unlink(missing_ok=True)
