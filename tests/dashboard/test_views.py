"""The providers' rows (friendly names, no key fingerprints) and the live stream's
rule: a topic is sent at the start and then only when it changed."""

from __future__ import annotations

import asyncio
import json

from chorus.dashboard._live import live_sse
from chorus.dashboard._views import friendly, provider_rows


def test_provider_rows_name_bodies_and_hide_key_fingerprints() -> None:
    rows = [
        {
            "key": "claude@3f9a1c2b7d",
            "outcomes": [True, False, True],
            "cooldown_until": 1060.0,
            "quota_state": "rate_limited",
            "last_error": "rate_limited: slow down",
        },
        {"key": "codex@default", "outcomes": [True], "cooldown_until": 0.0, "quota_state": "ok"},
        {"key": "mystery-acp@default", "outcomes": [], "cooldown_until": 0.0},
    ]
    shown = provider_rows(rows, ["claude", "codex", "gemini"], {"gemini": "no login"}, 1000.0)
    assert [r["name"] for r in shown] == ["Claude Code", "Codex", "Gemini CLI", "mystery-acp"]
    claude, codex, gemini, _ = shown
    assert (claude["accounts"], claude["ok"], claude["runs"]) == (["API key"], 2, 3)
    assert (claude["cooldown_s"], claude["quota"]) == (60.0, "rate_limited")
    assert (codex["accounts"], codex["cooldown_s"], codex["quota"]) == (["own login"], 0.0, "ok")
    assert gemini["unready"] == "no login"
    assert "3f9a1c2b7d" not in json.dumps(shown)
    assert friendly(None) == "router"


async def test_a_live_topic_is_sent_again_only_when_it_changed() -> None:
    values = iter([1, 1, 1, 2, 2, 3])

    async def snap() -> int:
        return next(values, 3)

    stream = live_sse({"n": snap}, every_s=0.0, ping_s=60)
    frames = [await anext(stream) for _ in range(4)]
    await stream.aclose()
    assert frames[0].startswith("retry:")
    assert [json.loads(f.split("data: ")[1]) for f in frames[1:]] == [1, 2, 3]
    assert all(f.startswith("event: n\n") for f in frames[1:])
    await asyncio.sleep(0)
