"""Thinking frameworks across vendors: consensus (parallel read-only planners and an
arbiter), reflect (a second vendor reviews, the first revises), sequential
(hypothesis, test, observe), script (a throwaway script answers), and auto."""

from chorus.frameworks._auto import pick
from chorus.frameworks._options import framework_options
from chorus.frameworks._plans import (
    Choice,
    Plan,
    Review,
    first_json,
    most_in_common,
    parse_plan,
    parse_review,
    parse_vote,
    plan_text,
    vote_prompt,
)
from chorus.frameworks._runner import (
    FRAMEWORKS,
    FrameworkName,
    Port,
    Settings,
    consensus,
    reflect,
    script,
    sequential,
)

__all__ = [
    "FRAMEWORKS",
    "Choice",
    "FrameworkName",
    "Plan",
    "Port",
    "Review",
    "Settings",
    "consensus",
    "first_json",
    "framework_options",
    "most_in_common",
    "parse_plan",
    "parse_review",
    "parse_vote",
    "pick",
    "plan_text",
    "reflect",
    "script",
    "sequential",
    "vote_prompt",
]
