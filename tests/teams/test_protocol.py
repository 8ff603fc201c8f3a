"""The pure parts of teams: config checks, the coordinator's plan, dropped files."""

from __future__ import annotations

import json

import pytest

from chorus.store import MessageRecord
from chorus.teams import (
    BadDropError,
    BadPlanError,
    Member,
    TeamConfig,
    TeamError,
    build,
    member_prompt,
    parse_members,
    parse_plan,
    plan_prompt,
    read_drop,
    synthesis_prompt,
)
from chorus.teams._config import to_toml

TEAM = TeamConfig(
    name="audit",
    members={"security": Member(body="claude", role="security"), "perf": Member(body="codex")},
)


def _msg(sender: str, kind: str, text: str, **body: str) -> MessageRecord:
    return MessageRecord(1, "m1", "audit", sender, "perf", kind, {"text": text, **body}, None, 0.0)


def test_members_parse_from_name_body_and_optional_role() -> None:
    members = parse_members(["security=claude:security review", "perf=codex"])
    assert members == {
        "security": Member(body="claude", role="security review"),
        "perf": Member(body="codex"),
    }


@pytest.mark.parametrize("pair", ["security", "=claude", "security=", "a=x"])
def test_bad_member_pairs_are_refused(pair: str) -> None:
    pairs = [pair, "a=y"] if pair == "a=x" else [pair]
    with pytest.raises(TeamError):
        parse_members(pairs)


@pytest.mark.parametrize(
    ("name", "members"),
    [
        ("Bad Name", {"a": Member(body="claude")}),
        ("ok", {}),
        ("ok", {"coordinator": Member(body="claude")}),
        ("ok", {"user": Member(body="claude")}),
        ("ok", {"has space": Member(body="claude")}),
    ],
)
def test_a_bad_team_is_refused_with_the_reason(name: str, members: dict[str, Member]) -> None:
    with pytest.raises(TeamError, match="bad team config"):
        build(name, members, "claude", False)


def test_the_config_round_trips_through_toml() -> None:
    import tomllib

    again = TeamConfig.model_validate(tomllib.loads(to_toml(TEAM)))
    assert again == TEAM
    assert again.mailbox_names == ["coordinator", "perf", "security"]


def test_an_unknown_member_is_an_error_naming_the_members() -> None:
    with pytest.raises(TeamError, match="members: coordinator, perf, security"):
        TEAM.check_member("ghost")
    with pytest.raises(TeamError):
        TEAM.check_member("coordinator", coordinator=False)


def test_the_plan_prompt_names_every_member_and_the_format() -> None:
    prompt = plan_prompt(TEAM, "audit it")
    assert '"security" (claude, security)' in prompt
    assert '"perf" (codex)' in prompt
    assert '{"assignments": [' in prompt


def test_a_plan_is_read_from_a_list_or_a_map_anywhere_in_the_answer() -> None:
    listed = 'Sure.\n```json\n{"assignments": [{"member": "perf", "task": "time it"}]}\n```'
    assert parse_plan(TEAM, listed) == ({"perf": "time it"}, [])
    mapped = '{"assignments": {"security": "scan", "perf": "profile"}}'
    assert parse_plan(TEAM, mapped)[0] == {"security": "scan", "perf": "profile"}


def test_a_plan_naming_a_stranger_leaves_it_out_with_a_note() -> None:
    text = '{"assignments": [{"member": "ghost", "task": "x"}, {"member": "perf", "task": "y"}]}'
    plan, notes = parse_plan(TEAM, text)
    assert plan == {"perf": "y"}
    assert notes == ["the plan named 'ghost', who is not a member: left out"]


@pytest.mark.parametrize(
    "text", ["no json here", '{"steps": ["a"]}', '{"assignments": [{"member": "ghost"}]}']
)
def test_a_plan_without_a_usable_assignment_is_an_error(text: str) -> None:
    with pytest.raises(BadPlanError):
        parse_plan(TEAM, text)


def test_a_member_prompt_carries_its_messages_in_order() -> None:
    prompt = member_prompt(
        TEAM, "perf", [_msg("coordinator", "task", "A"), _msg("user", "status", "B")]
    )
    assert "you are 'perf'" in prompt
    assert prompt.index("[task from coordinator]\nA") < prompt.index("[status from user]\nB")


def test_the_synthesis_prompt_holds_every_result() -> None:
    results = [
        _msg("security", "result", "R1", state="succeeded"),
        _msg("perf", "result", "R2", state="failed"),
    ]
    prompt = synthesis_prompt("the task", results)
    assert "result from security (succeeded) ---\nR1" in prompt
    assert "result from perf (failed) ---\nR2" in prompt


def test_a_dropped_json_file_becomes_a_message() -> None:
    data = json.dumps({"text": " hi ", "kind": "steer", "from": "security"}).encode()
    dropped = read_drop("m.json", data, TEAM.mailbox_names)
    assert (dropped.sender, dropped.kind, dropped.text) == ("security", "steer", "hi")
    assert read_drop("m.json", data, TEAM.mailbox_names).id == dropped.id  # stable id
    assert read_drop("other.json", data, TEAM.mailbox_names).id != dropped.id


def test_any_other_dropped_file_is_its_text_from_the_user() -> None:
    dropped = read_drop("note.txt", b"look here\n", TEAM.mailbox_names)
    assert (dropped.sender, dropped.kind, dropped.text) == ("user", "status", "look here")


@pytest.mark.parametrize(
    ("name", "data", "reason"),
    [
        ("a.json", b"{nope", "not valid JSON"),
        ("a.json", b"[1]", "not an object"),
        ("a.json", b'{"kind": "task"}', 'no "text"'),
        ("a.json", b'{"text": "x", "kind": "gossip"}', "unknown kind"),
        ("a.json", b'{"text": "x", "from": "ghost"}', "unknown sender"),
        ("a.json", b'{"text": "x", "id": "../../etc"}', '"id"'),
        ("a.txt", b"  \n", "empty"),
        ("a.txt", b"\xff\xfe", "not UTF-8"),
        ("a.txt", b"x" * (2 << 20), "larger than"),
    ],
)
def test_a_malformed_drop_says_why(name: str, data: bytes, reason: str) -> None:
    with pytest.raises(BadDropError, match=reason):
        read_drop(name, data, TEAM.mailbox_names)
