"""``status`` prints the quota each provider stated beside the bodies that use it."""

from __future__ import annotations

from chorus.cli._jobs import quota_lines

NOW = 1000.0
QUOTA = {
    "openai": {
        "upstream": "https://api.openai.com/v1",
        "at": NOW - 5,
        "windows": {
            "requests": {"limit": 500, "remaining": 498, "reset_at": NOW + 60},
            "tokens": {"limit": None, "remaining": 9000, "reset_at": None},
        },
    }
}


def test_a_bodys_quota_line() -> None:
    assert quota_lines(QUOTA, "codex", NOW) == [
        "  quota (openai, said 5s ago): requests 498/500 left, resets in 60s; tokens 9000 left"
    ]
    assert quota_lines(QUOTA, "codex-exec", NOW) == quota_lines(QUOTA, "codex", NOW)


def test_no_line_where_the_provider_said_nothing() -> None:
    assert quota_lines(QUOTA, "claude", NOW) == []
    assert quota_lines({}, "codex", NOW) == []
    assert quota_lines(QUOTA, "my-acp-agent", NOW) == []
