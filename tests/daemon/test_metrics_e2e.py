"""``/metrics`` carries the daemon's series (prometheus_client), read off the log:
jobs, turns, tokens and cost per body and model, denials, queue depth."""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING

import pytest

from chorus.testing import text

if TYPE_CHECKING:
    from conftest import Chorus

pytestmark = pytest.mark.e2e


def _metrics(chorus: Chorus) -> dict[str, float]:
    status, raw = chorus.client.request("GET", "/metrics")
    assert status == 200
    samples: dict[str, float] = {}
    for line in raw.decode().splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            samples[name] = float(value)
    return samples


def test_metrics_count_jobs_turns_tokens_and_cost(chorus: Chorus) -> None:
    chorus.server.script([text("one"), text("two")])
    turns = []
    for prompt in ("first", "second"):
        asked = chorus.run("ask", prompt, "--body", "claude", "--json")
        assert asked.returncode == 0, asked.stderr
        events = [json.loads(line) for line in asked.stdout.splitlines()]
        turns += [e for e in events if e["type"] == "turn_completed"]
        model = next(e["model"] for e in events if e["type"] == "session_started")
    deadline = time.monotonic() + 10
    while _metrics(chorus).get('chorus_jobs_total{body="claude",state="succeeded"}') != 2:
        assert time.monotonic() < deadline, _metrics(chorus)
        time.sleep(0.2)
    samples = _metrics(chorus)
    labels = f'body="claude",model="{model}"'
    assert samples[f"chorus_turns_total{{{labels}}}"] == 2
    tokens_in = sum(t["usage"]["input_tokens"] for t in turns)
    by_kind = f'body="claude",kind="input",model="{model}"'  # labels print sorted
    assert samples[f"chorus_tokens_total{{{by_kind}}}"] == tokens_in
    cost = sum(t["cost_usd"] for t in turns)
    assert samples[f"chorus_cost_usd_total{{{labels}}}"] == pytest.approx(cost)
    assert samples["chorus_queue_depth"] == 0
    assert "chorus_gateway_reconnect_attempts_total" in samples  # one registry, both parts
