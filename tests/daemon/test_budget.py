"""The budget ledger and its limits, and the daemon's structured log lines."""

from __future__ import annotations

import json
import logging
import time

from chorus.config import BudgetConfig
from chorus.daemon._budget import Ledger, budget_error, refusal
from chorus.daemon._journal import JsonLineFormatter, journal
from chorus.events import JobEnded, Metered, TextDelta, TurnCompleted


def turn(
    cost: float, body: str = "claude", job: str = "j1", ts: float | None = None
) -> TurnCompleted:
    return TurnCompleted(cost_usd=cost, body=body, job_id=job, ts=ts or time.time())


def test_the_ledger_counts_today_per_body_and_per_job() -> None:
    ledger = Ledger()
    ledger.observe(turn(0.5))
    ledger.observe(turn(0.25, body="codex", job="j2"))
    ledger.observe(turn(1.0, ts=time.time() - 3 * 86400))  # another day: the job only
    ledger.observe(TextDelta(text="hi"))
    today = ledger.today()
    assert today["usd"] == 0.75
    assert today["bodies"] == {"claude": 0.5, "codex": 0.25}
    assert ledger.jobs == {"j1": 1.5, "j2": 0.25}


def test_each_limit_refuses_with_its_reason() -> None:
    ledger = Ledger()
    ledger.observe(turn(0.5))
    assert refusal(ledger, BudgetConfig(), "j1", "claude") is None
    assert "per_job_usd" in (refusal(ledger, BudgetConfig(per_job_usd=0.5), "j1", "claude") or "")
    assert refusal(ledger, BudgetConfig(per_job_usd=0.5), "j9", "claude") is None
    assert "daily_usd" in (refusal(ledger, BudgetConfig(daily_usd=0.4), "j9", "codex") or "")
    caps = BudgetConfig(bodies={"claude": 0.5})
    assert "[budget.bodies] claude" in (refusal(ledger, caps, "j9", "claude") or "")
    assert refusal(ledger, caps, "j9", "codex") is None
    error = budget_error("x")
    assert error.code == "budget_exceeded"
    assert not error.retryable


def test_transitions_are_json_lines_and_the_rest_plain() -> None:
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    logger = logging.getLogger("chorus.journal")
    keep = Keep()
    logger.addHandler(keep)
    logger.setLevel(logging.INFO)
    try:
        journal(JobEnded(state="succeeded", session_id="s1", job_id="j1", body="claude"))
        journal(TextDelta(text="not a transition"))
    finally:
        logger.removeHandler(keep)
    formatter = JsonLineFormatter("%(name)s %(message)s")
    (record,) = records
    line = json.loads(formatter.format(record))
    assert line["event"] == "job_ended"
    assert (line["session"], line["job"], line["body"], line["state"]) == (
        "s1",
        "j1",
        "claude",
        "succeeded",
    )
    assert line["logger"] == "chorus.journal"
    plain = logging.LogRecord("chorus.daemon", logging.INFO, __file__, 1, "hello", None, None)
    assert formatter.format(plain) == "chorus.daemon hello"


def metered(cost: float | None, job: str = "j1", request: str = "r1") -> Metered:
    return Metered(api="openai", cost_usd=cost, body="codex", job_id=job, request_id=request)


def test_a_metered_job_counts_its_requests_never_its_bodys_own_report_too() -> None:
    ledger = Ledger()
    ledger.observe(metered(0.25))
    ledger.observe(metered(0.25))  # the log's copy of the meter's own report
    ledger.observe(metered(0.5, request="r2"))
    ledger.observe(turn(9.0, body="codex"))  # the CLI's own cost of the same turn
    ledger.observe(metered(None, job="j2", request="r3"))  # an unpriced model
    ledger.observe(turn(2.0, job="j2"))
    ledger.observe(turn(1.0, job="j3"))  # not metered: its report counts
    assert ledger.jobs == {"j1": 0.75, "j3": 1.0}
    assert ledger.today()["usd"] == 1.75


def test_the_ledger_keeps_no_entry_of_an_ended_job() -> None:
    ledger = Ledger()
    for n in range(1000):
        job = f"j{n}"
        ledger.observe(metered(0.01, job=job, request=f"r{n}") if n % 2 else turn(0.01, job=job))
        ledger.refused[job] = "over"
        ledger.observe(JobEnded(state="succeeded", job_id=job, ts=time.time()))
    ledger.observe(turn(0.5, job="running"))
    assert ledger.jobs == {"running": 0.5}
    assert ledger.refused == {}
    assert ledger._metered == set()
    assert ledger.today()["usd"] == 10.5  # the day's spend still counts every job


def test_a_request_over_the_budget_is_refused_before_it_goes_out() -> None:
    ledger = Ledger()
    limits = BudgetConfig(per_job_usd=0.5)
    assert refusal(ledger, limits, "j1", "codex") is None
    ledger.observe(metered(0.5))
    assert "per_job_usd" in str(refusal(ledger, limits, "j1", "codex"))
    assert refusal(ledger, limits, "j2", "codex") is None
