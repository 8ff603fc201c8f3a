"""``chorus usage`` sums each completed turn's usage from the log: the meter's
priced records where the meter saw the requests."""

from __future__ import annotations

import datetime as dt
import json
from typing import TYPE_CHECKING

import pytest

from chorus.daemon import is_responding
from chorus.testing import text

if TYPE_CHECKING:
    from conftest import Chorus

pytestmark = pytest.mark.e2e


def test_usage_by_body_model_day_and_session(chorus: Chorus) -> None:
    chorus.server.script([text("one"), text("two")])
    for prompt in ("first", "second"):
        asked = chorus.run("ask", prompt, "--body", "claude", "--json")
        assert asked.returncode == 0, asked.stderr
    logged = [
        json.loads(line)
        for line in chorus.run("log", _newest(chorus), "--json").stdout.splitlines()
    ]
    turns = [e for e in logged if e["type"] == "turn_completed"]
    assert len(turns) == 1
    per_turn = turns[0]
    # the meter's own price of the turn's requests (on by default) is what counts
    metered = [e["cost_usd"] for e in logged if e["type"] == "metered"]
    assert metered
    assert chorus.run("stop").returncode == 0

    rows = json.loads(chorus.run("usage", "--json").stdout)
    assert [(r["key"], r["turns"]) for r in rows] == [("claude", 2)]
    assert rows[0]["input_tokens"] == 2 * per_turn["usage"]["input_tokens"]
    assert rows[0]["cost_usd"] == pytest.approx(2 * sum(metered))
    days = json.loads(chorus.run("usage", "--by", "day", "--json").stdout)
    assert [r["key"] for r in days] == [dt.date.today().isoformat()]
    models = json.loads(chorus.run("usage", "--by", "model", "--json").stdout)
    assert sum(r["turns"] for r in models) == 2
    assert all(r["key"] != "default" for r in models)  # the model the CLI announced
    sessions = json.loads(chorus.run("usage", "--by", "session", "--json").stdout)
    assert len(sessions) == 2
    tomorrow = (dt.date.today() + dt.timedelta(days=1)).isoformat()
    assert json.loads(chorus.run("usage", "--since", tomorrow, "--json").stdout) == []
    assert len(json.loads(chorus.run("usage", "--since", "1h", "--json").stdout)) == 1
    table = chorus.run("usage").stdout
    assert "claude" in table
    assert "total" in table
    assert not is_responding()  # reading the log started nothing
    assert chorus.run("usage", "--by", "weather").returncode == 2


def _newest(chorus: Chorus) -> str:
    return str(json.loads(chorus.run("jobs", "--json").stdout)[-1]["id"])
