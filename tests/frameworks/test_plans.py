"""The pure parts of the frameworks: reading plans and reviews, the rule arbiter, and
auto's pick."""

from __future__ import annotations

import pytest

from chorus.frameworks import first_json, most_in_common, parse_plan, parse_review, pick
from chorus.frameworks._plans import execution_prompt, plan_text, timed


def test_a_plan_is_read_from_json_anywhere_in_the_answer() -> None:
    text = 'Here you go:\n```json\n{"summary": "do it", "steps": ["a", "b"]}\n```'
    plan = parse_plan("codex", text)
    assert (plan.body, plan.summary, plan.steps, plan.structured) == (
        "codex",
        "do it",
        ("a", "b"),
        True,
    )


def test_an_answer_without_json_is_a_one_step_unstructured_plan() -> None:
    plan = parse_plan("gemini", "  just edit the file  ")
    assert plan.steps == ("just edit the file",)
    assert not plan.structured


def test_first_json_skips_braces_that_are_not_json() -> None:
    assert first_json('use {curly} then {"ok": true}') == {"ok": True}
    assert first_json("no json here") is None


def test_the_arbiter_picks_the_plan_the_others_share_most() -> None:
    plans = [
        parse_plan("gemini", '{"steps": ["delete the repository", "start over"]}'),
        parse_plan("claude", '{"steps": ["write chosen.txt with yes", "check the file"]}'),
        parse_plan("codex", '{"steps": ["write chosen.txt with yes", "report back"]}'),
    ]
    choice = most_in_common(plans)
    assert choice.plan.body == "claude"
    assert choice.scores["gemini"] < choice.scores["codex"] <= choice.scores["claude"]
    assert "in common" in choice.reason


def test_ties_go_to_the_earlier_planner() -> None:
    plans = [
        parse_plan("one", '{"steps": ["same step"]}'),
        parse_plan("two", '{"steps": ["same step"]}'),
    ]
    choice = most_in_common(plans)
    assert choice.plan.body == "one"
    assert "first planner given" in choice.reason


def test_with_two_plans_the_faster_planner_wins_whatever_they_share() -> None:
    slow = timed(parse_plan("claude", '{"steps": ["write a.txt", "check a.txt"]}'), 9.0)
    fast = timed(parse_plan("codex", '{"steps": ["write a.txt with care"]}'), 2.5)
    choice = most_in_common([slow, fast])
    assert choice.plan.body == "codex"
    assert choice.reason == "the fastest planner (2.5s)"


def test_with_three_plans_agreement_comes_before_speed() -> None:
    plans = [
        timed(parse_plan("gemini", '{"steps": ["delete everything"]}'), 1.0),
        timed(parse_plan("claude", '{"steps": ["write chosen.txt with yes"]}'), 5.0),
        timed(parse_plan("codex", '{"steps": ["write chosen.txt with yes"]}'), 4.0),
    ]
    choice = most_in_common(plans)
    assert choice.plan.body == "codex"  # claude and codex agree; codex was faster
    assert choice.reason == "the fastest planner (4.0s)"


def test_a_free_text_plan_is_passed_once_as_written() -> None:
    plan = parse_plan("gemini", "1. Create notes.txt\n2. Add a title")
    choice = most_in_common([plan])
    prompt = execution_prompt("write notes", choice)
    assert prompt.count("Create notes.txt") == 1
    assert "1. 1." not in prompt
    assert plan_text(plan) == "Chosen plan (from gemini): 1. Create notes.txt\n2. Add a title"


def test_a_structured_plan_beats_an_unstructured_one() -> None:
    plans = [parse_plan("a", "free text plan"), parse_plan("b", '{"steps": ["x"]}')]
    assert most_in_common(plans).plan.body == "b"


def test_no_plans_is_an_error() -> None:
    with pytest.raises(ValueError, match="no plans"):
        most_in_common([])


def test_reviews() -> None:
    found = parse_review('{"ok": false, "findings": ["missing newline in a.txt"]}')
    assert not found.ok
    assert found.findings == ("missing newline in a.txt",)
    assert parse_review('{"ok": true, "findings": []}').ok
    assert not parse_review('{"ok": true, "findings": ["but this"]}').ok  # findings win
    unreadable = parse_review("looks fine to me")
    assert (unreadable.ok, unreadable.readable) == (False, False)  # never "no findings"


@pytest.mark.parametrize(
    ("prompt", "healthy", "framework"),
    [
        ("why does the login test fail on CI?", 3, "sequential"),
        ("compute the sum of column B in data.csv", 3, "script"),
        ("design the architecture of the cache layer", 3, "consensus"),
        ("design the architecture of the cache layer", 1, "reflect"),
        ("rename Foo to Bar", 3, "direct"),
    ],
)
def test_auto_picks_by_class_and_wording(prompt: str, healthy: int, framework: str) -> None:
    chosen, reason = pick(prompt, healthy)
    assert chosen == framework
    assert reason
