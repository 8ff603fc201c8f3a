"""Classifier, routing strategies, provider health and cooldowns."""

from __future__ import annotations

import pytest

from chorus import UnknownBodyError
from chorus.events import ErrorCode, ErrorInfo
from chorus.router import (
    CooldownPolicy,
    HealthBook,
    Router,
    TaskKind,
    TaskLoad,
    classify,
    provider_key,
)

BODIES = ["claude", "codex", "gemini"]
QUOTA = ErrorInfo(code=ErrorCode.QUOTA_EXHAUSTED, message="quota")
RATE = ErrorInfo(code=ErrorCode.RATE_LIMITED, message="slow down", retry_after_s=120)


@pytest.mark.parametrize(
    ("prompt", "kind", "load"),
    [
        ("Debug why the cache has a race and explain the root cause", "deep_reasoning", None),
        ("Rename foo to bar and run the linter", "structured_execution", None),
        ("Write a poem about the build", "creative", None),
        ("Fix each file until all tests pass", None, "iterative"),
        ("Summarize the logs of the whole repo", None, "token_heavy"),
        ("hello", "structured_execution", "token_light"),
    ],
)
def test_classifier(prompt: str, kind: str | None, load: str | None) -> None:
    result = classify(prompt)
    if kind:
        assert result.kind == TaskKind(kind)
    if load:
        assert result.load == TaskLoad(load)


def test_smart_routing_follows_the_default_matrix() -> None:
    router = Router(BODIES)
    assert router.preferences("Investigate and explain this design trade-off")[0] == "claude"
    assert router.preferences("Convert the config and update versions")[0] == "gemini"
    assert router.preferences("Summarize the large logs")[0] == "gemini"


def test_override_and_only_and_round_robin() -> None:
    assert Router(BODIES).preferences("poem", override="codex")[0] == "codex"
    assert Router(BODIES, strategy="codex_only").preferences("poem") == ["codex"]
    rr = Router(BODIES, strategy="round_robin")
    assert [rr.preferences("x")[0] for _ in range(4)] == ["claude", "codex", "gemini", "claude"]


def test_unknown_bodies_are_user_errors() -> None:
    with pytest.raises(UnknownBodyError):
        Router(BODIES).preferences("x", override="nope")
    with pytest.raises(UnknownBodyError):
        Router(BODIES, strategy="nope_only")


def test_matrix_from_config_overrides_defaults() -> None:
    router = Router(BODIES, matrix={"creative": ["codex"]})
    assert router.preferences("write a poem")[0] == "codex"


def test_cooldown_grows_exponentially_and_caps() -> None:
    book = HealthBook(CooldownPolicy(base_s=10, max_s=35, multiplier=2))
    book.failure("claude", QUOTA, now=0)
    assert book.get("claude").cooldown_until == 10
    book.failure("claude", QUOTA, now=10)
    assert book.get("claude").cooldown_until == 30
    book.failure("claude", QUOTA, now=30)
    assert book.get("claude").cooldown_until == 65  # capped at 35 s
    assert book.get("claude").quota_state == "exhausted"
    book.success("claude")
    assert book.healthy("claude", now=31)


def test_retry_after_wins_when_later_and_success_rate_window() -> None:
    book = HealthBook(CooldownPolicy(base_s=1, window=4))
    book.failure("codex", RATE, now=100)
    assert book.get("codex").cooldown_until == 220
    for _ in range(3):
        book.success("codex")
    assert book.get("codex").success_rate == 0.75
    book.failure("codex", ErrorInfo(code=ErrorCode.API_ERROR, message="bad"), now=0)
    assert book.healthy("codex", now=1)  # a plain API error does not cool down


def test_choose_skips_unhealthy_and_excluded_and_reports_none() -> None:
    book = HealthBook()
    router = Router(BODIES)
    book.failure("claude", QUOTA, now=0)
    assert router.choose("explain why", book, now=1) == "codex"
    assert router.choose("explain why", book, now=1, exclude=["codex"]) == "gemini"
    book.failure("gemini", QUOTA, now=0)
    assert router.choose("explain", book, now=1, exclude=["codex"]) is None
    assert book.earliest_reset(["claude", "gemini"]) == 30


def test_health_persists_as_json() -> None:
    book = HealthBook()
    book.failure("gemini", QUOTA, now=5)
    again = HealthBook()
    again.load(book.to_json())
    assert again.get("gemini").cooldown_until == book.get("gemini").cooldown_until
    assert again.get("gemini").quota_state == "exhausted"


def test_provider_key_separates_credentials_without_revealing_them() -> None:
    one = provider_key("claude", {"ANTHROPIC_API_KEY": "sk-ant-first-account-000"})
    two = provider_key("claude", {"ANTHROPIC_API_KEY": "sk-ant-second-account-111"})
    assert one != two
    assert one.startswith("claude@")
    assert "account" not in one
    assert provider_key("claude", {}) == "claude@default"
    assert provider_key("claude", {"ANTHROPIC_API_KEY": "sk-ant-first-account-000"}) == one


def test_choose_uses_provider_keys_so_another_account_stays_usable() -> None:
    book = HealthBook()
    router = Router(BODIES)
    accounts = {"claude": "claude@aaaa", "codex": "codex@bbbb", "gemini": "gemini@cccc"}
    book.failure("claude@aaaa", QUOTA, now=0)
    assert router.choose("explain why", book, now=1, key=accounts.__getitem__) == "codex"
    accounts["claude"] = "claude@dddd"  # switched to another account
    assert router.choose("explain why", book, now=1, key=accounts.__getitem__) == "claude"


def test_explain_names_the_class_the_order_and_the_bodies_passed_over() -> None:
    book = HealthBook()
    router = Router(BODIES)
    route = router.explain("Investigate why the build is slow", book, now=0)
    assert route.body == "claude"
    assert route.classification is not None
    assert route.classification.kind == TaskKind.DEEP_REASONING
    assert route.reason.startswith("first for deep_reasoning/token_light")
    assert route.skipped == []
    book.failure("claude", QUOTA, now=0)
    route = router.explain("Investigate why the build is slow", book, now=10)
    assert route.body == "codex"
    assert route.reason.startswith("first healthy for deep_reasoning")
    assert route.skipped == ["claude: cooling down, 20s left"]
    only = Router(BODIES, strategy="gemini_only").explain("x", book, now=10)
    assert (only.body, only.reason, only.classification) == ("gemini", "strategy gemini_only", None)


def test_a_body_without_a_login_is_never_routed_to_nor_failed_over_to() -> None:
    router = Router(["gemini", "claude", "codex"])
    book = HealthBook()
    unready = {"gemini": "needs login: set GEMINI_API_KEY"}.get
    route = router.explain("Summarize this huge log file", book, now=0, unready=unready)
    assert route.body != "gemini"
    assert "gemini: needs login: set GEMINI_API_KEY" in route.skipped
    picked = router.choose("Summarize this huge log file", book, now=0, unready=unready)
    assert picked in ("claude", "codex")
    assert router.choose("x", book, now=0, exclude=["claude", "codex"], unready=unready) is None


def test_a_provider_nearly_out_is_routed_around_until_its_window_resets() -> None:
    book = HealthBook()
    router = Router(BODIES)
    assert router.choose("explain why", book, now=1) == "claude"
    book.low("claude", until=100)  # the meter read "2 requests left, resets at 100"
    assert router.choose("explain why", book, now=1) == "codex"
    book.success("claude")  # a turn that ends well does not refill the window
    assert router.choose("explain why", book, now=50) == "codex"
    again = HealthBook()
    again.load(book.to_json())
    assert again.get("claude").low_until == 100
    assert router.choose("explain why", book, now=100) == "claude"
    book.low("claude", until=0)  # a later statement with enough left
    assert router.choose("explain why", book, now=2) == "claude"
