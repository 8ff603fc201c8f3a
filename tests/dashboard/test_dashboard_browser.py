"""The dashboard in a real headless Chromium (Debian's ``chromium``, driven by
Playwright for Python; never a downloaded browser) against a real daemon whose
Claude CLI talks to the scripted model server.

Each test saves screenshots of the pages it saw under its tmp dir
(``screenshots/``); with ``CHORUS_SCREENSHOTS=DIR`` they are copied there too
(that is how docs/dashboard-jobs.png is made).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from chorus.testing import shell, slow_text, text, tool_call
from tests.dashboard.conftest import DashDaemon

pytestmark = pytest.mark.e2e

CHROMIUM = Path(shutil.which("chromium") or "/usr/bin/chromium")
ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]
FLAG_CALL = tool_call(
    "mcp__chorus__flag",
    {
        "question": "Archive or delete the old logs?",
        "options": ["archive", "delete"],
        "default": "archive",
    },
)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists():
        if os.environ.get("CHORUS_REQUIRE_AGENTS") == "1":
            pytest.fail("Debian's chromium is not installed (./run installs it)")
        pytest.skip("Debian's chromium is not installed (./run installs it)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        launched = pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Any, tmp_path: Path) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    opened = context.new_page()
    opened.set_default_timeout(60_000)
    yield opened
    context.close()


class Shots:
    """Screenshots as test artifacts."""

    def __init__(self, where: Path) -> None:
        self.where = where
        where.mkdir(parents=True, exist_ok=True)

    def take(self, page: Any, name: str) -> Path:
        path = self.where / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        extra = os.environ.get("CHORUS_SCREENSHOTS")
        if extra:
            Path(extra).mkdir(parents=True, exist_ok=True)
            shutil.copy(path, Path(extra) / path.name)
        assert path.stat().st_size > 1000  # a real image, not an empty file
        return path


@pytest.fixture
def shots(tmp_path: Path) -> Shots:
    return Shots(tmp_path / "screenshots")


def _login(page: Any, dash: DashDaemon) -> None:
    page.goto(dash.login_url())
    page.wait_for_url(f"{dash.base}/")


def _seqs(page: Any) -> list[int]:
    seqs = page.eval_on_selector_all("[data-seq]", "els => els.map(e => +e.dataset.seq)")
    return sorted(seqs)


def _log_seqs(dash: DashDaemon, job_id: str) -> list[int]:
    return [json.loads(line)["seq"] for line in dash.daemon.event_lines(job_id, follow=False)]


def test_a_cli_job_appears_live_and_its_events_stream_in(
    dash_with: Callable[..., DashDaemon], page: Any, shots: Shots
) -> None:
    dash = dash_with()
    _login(page, dash)
    page.wait_for_selector("#empty:not([hidden])")  # no job yet
    dash.server.script([slow_text("counting sheep one by one " * 6, chunks=24, delay=0.25)])
    job_id = dash.run("task", "count sheep", "--body", "claude").stdout.strip()
    row = f'tr[data-job="{job_id}"]'
    page.wait_for_selector(f'{row}[data-status="running"]')  # appeared live, no reload
    shots.take(page, "jobs-running")
    page.click(f"{row} a")
    page.wait_for_selector("#conversation li.t-text_delta")  # streaming while it runs
    page.wait_for_selector("#conversation li.t-job_ended")
    assert page.inner_text("#job-status") == "succeeded"
    assert _seqs(page) == _log_seqs(dash, job_id)  # every event, once
    assert "counting sheep" in page.inner_text("#conversation")
    shots.take(page, "job-detail")
    page.goto(f"{dash.base}/")
    page.wait_for_selector(f'{row}[data-status="done"]')
    assert "claude" in page.inner_text(row)
    shots.take(page, "dashboard-jobs")
    for name in ("flags", "teams", "routines", "health", "memory", "audit"):
        page.goto(f"{dash.base}/{name}")
        page.wait_for_selector("h1")
        shots.take(page, name)
    assert page.inner_text("#verify").startswith("chain verified")


def test_a_steer_typed_in_the_box_reaches_the_model(
    dash_with: Callable[..., DashDaemon], page: Any, shots: Shots
) -> None:
    dash = dash_with()
    dash.server.script([shell("sleep 10"), text("steered fine"), text("spare")])
    job_id = dash.run("task", "count slowly", "--body", "claude").stdout.strip()
    _login(page, dash)
    page.goto(f"{dash.base}/jobs/{job_id}")
    page.wait_for_selector("#toollog li.t-tool_call")
    page.fill("#steer-text", "also mention the word kestrel")
    page.click("#steer-form button[type=submit]")
    page.wait_for_function(
        "document.getElementById('steer-result').textContent.startsWith('sent:')"
    )
    shots.take(page, "job-steered")
    page.wait_for_selector("#conversation li.t-job_ended")
    said = json.dumps([r.body for r in dash.server.turn_requests()])
    assert "also mention the word kestrel" in said  # the scripted server saw it
    steers = page.inner_text("#conversation li.t-steer")
    assert "kestrel" in steers


def test_a_flag_shows_up_is_approved_and_the_job_is_told(
    dash_with: Callable[..., DashDaemon], page: Any, shots: Shots
) -> None:
    dash = dash_with()
    dash.server.script([FLAG_CALL, shell("sleep 12"), text("deleted them"), text("spare")])
    job_id = dash.run("task", "tidy the logs", "--body", "claude").stdout.strip()
    _login(page, dash)
    page.goto(f"{dash.base}/flags")
    card = page.wait_for_selector(".card.k-flag.f-pending")
    assert "Archive or delete the old logs?" in card.inner_text()
    assert job_id[:12] in card.inner_text()
    page.goto(f"{dash.base}/")
    page.wait_for_selector(f'tr[data-job="{job_id}"][data-status="flagged"]')
    page.goto(f"{dash.base}/flags")
    page.wait_for_selector(".card.k-flag.f-pending")
    shots.take(page, "flags-pending")
    page.select_option(".card.k-flag .choice", "delete")
    page.click(".card.k-flag button.approve")
    page.wait_for_selector("#board-empty:not([hidden])")
    page.check("#show-decided")
    page.wait_for_selector(".card.f-approved")
    assert "chose delete" in page.inner_text(".card.f-approved")
    shots.take(page, "flags-decided")
    page.goto(f"{dash.base}/jobs/{job_id}")
    page.wait_for_selector("#conversation li.t-job_ended", timeout=90_000)
    said = json.dumps([r.body for r in dash.server.turn_requests()])
    assert "the person chose 'delete'" in said  # the job received the decision
    log = page.inner_text("#toollog")
    assert "raised" in log
    assert "approved" in log


def test_the_stream_survives_dropped_connections_with_no_gap(
    dash_with: Callable[..., DashDaemon], page: Any, shots: Shots
) -> None:
    # The server ends every stream after a second: the browser reconnects with
    # Last-Event-ID several times while the job streams.
    dash = dash_with("stream_rotate_s = 1")
    dash.server.script([slow_text("a steady trickle of words " * 8, chunks=40, delay=0.2)])
    job_id = dash.run("task", "trickle", "--body", "claude").stdout.strip()
    _login(page, dash)
    page.goto(f"{dash.base}/jobs/{job_id}")
    page.wait_for_selector("#conversation li.t-job_ended", timeout=90_000)
    opens = page.evaluate("window.chorusStreamOpens")
    assert opens >= 3, opens  # it really was cut and resumed
    seqs = _seqs(page)
    assert seqs == _log_seqs(dash, job_id)  # no gap, no duplicate
    assert len(seqs) > 30
    shots.take(page, "job-resumed")
