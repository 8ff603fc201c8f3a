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
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from chorus.testing import shell, slow_text, text, tool_call
from tests.dashboard.conftest import DashDaemon, until

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
    """The seqs of the raw events list (every event the page received)."""
    seqs = page.eval_on_selector_all("#raw [data-seq]", "els => els.map(e => +e.dataset.seq)")
    return sorted(seqs)


def _ended(page: Any, timeout: float = 60_000) -> None:
    page.wait_for_selector("#raw li.t-job_ended", state="attached", timeout=timeout)


def axe(page: Any, name: str) -> None:
    """No serious or critical violation from axe-core on the page as it is now."""
    from axe_playwright_python.sync_playwright import Axe

    found = Axe().run(page).response["violations"]
    bad = [
        (v["id"], v["impact"], [n["target"] for n in v["nodes"]][:3])
        for v in found
        if v["impact"] in ("serious", "critical")
    ]
    assert bad == [], f"{name}: {bad}"


def _log_seqs(dash: DashDaemon, job_id: str) -> list[int]:
    return [json.loads(line)["seq"] for line in dash.daemon.event_lines(job_id, follow=False)]


def test_a_cli_job_appears_live_and_its_events_stream_in(
    dash_with: Callable[..., DashDaemon], page: Any, shots: Shots
) -> None:
    dash = dash_with()
    _login(page, dash)
    page.wait_for_selector("#empty:not([hidden])")  # no job yet
    dash.server.script([slow_text("counting sheep one by one " * 6, chunks=24, delay=0.25)])
    dash.start()
    job_id = dash.run("task", "count sheep", "--body", "claude").stdout.strip()
    row = f'tr[data-job="{job_id}"]'
    page.wait_for_selector(f'{row}[data-status="running"]')  # appeared live, no reload
    shots.take(page, "jobs-running")
    page.click(f"{row} a")
    page.wait_for_selector("#conversation .msg.assistant")  # streaming while it runs
    _ended(page)
    page.wait_for_selector("#job-status.s-done")
    assert page.inner_text("#job-status") == "done"  # as the list and `chorus jobs` say
    assert page.is_hidden("#interrupt")  # nothing to interrupt in a finished job
    assert _seqs(page) == _log_seqs(dash, job_id)  # every event, once
    assert "counting sheep" in page.inner_text("#conversation")
    shots.take(page, "job-detail")
    page.goto(f"{dash.base}/")
    page.wait_for_selector(f'{row}[data-status="done"]')
    assert "Claude Code" in page.inner_text(row)  # the agent by its name
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
    dash.start()
    job_id = dash.run("task", "count slowly", "--body", "claude").stdout.strip()
    _login(page, dash)
    page.goto(f"{dash.base}/jobs/{job_id}")
    page.wait_for_selector("#conversation .msg.tool")
    page.fill("#steer-text", "also mention the word kestrel")
    page.click("#steer-form button[type=submit]")
    page.wait_for_selector("#steer-result:has-text('sent:')")  # no eval: the CSP forbids it
    shots.take(page, "job-steered")
    _ended(page)
    said = json.dumps([r.body for r in dash.server.turn_requests()])
    assert "also mention the word kestrel" in said  # the scripted server saw it
    steer = page.locator("#conversation .msg.you", has_text="kestrel").inner_text()
    assert "steer" in steer.lower()


def test_a_flag_shows_up_is_approved_and_the_job_is_told(
    dash_with: Callable[..., DashDaemon], page: Any, shots: Shots
) -> None:
    dash = dash_with()
    dash.server.script([FLAG_CALL, shell("sleep 12"), text("deleted them"), text("spare")])
    dash.start()
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
    _ended(page, 90_000)
    said = json.dumps([r.body for r in dash.server.turn_requests()])
    assert "the person chose 'delete'" in said  # the job received the decision
    flags = page.inner_text("#conversation").lower()
    assert "flag raised" in flags
    assert "flag approved" in flags


def test_the_stream_survives_dropped_connections_with_no_gap(
    dash_with: Callable[..., DashDaemon], page: Any, shots: Shots
) -> None:
    # The server ends every stream after a second: the browser reconnects with
    # Last-Event-ID several times while the job streams.
    dash = dash_with("stream_rotate_s = 1")
    dash.server.script([slow_text("a steady trickle of words " * 8, chunks=80, delay=0.2)])
    dash.start()
    job_id = dash.run("task", "trickle", "--body", "claude").stdout.strip()
    _login(page, dash)
    page.goto(f"{dash.base}/jobs/{job_id}")
    _ended(page, 90_000)
    opens = page.evaluate("window.chorusStreamOpens")
    assert opens >= 3, opens  # it really was cut and resumed
    seqs = _seqs(page)
    assert seqs == _log_seqs(dash, job_id)  # no gap, no duplicate
    assert len(seqs) > 30
    shots.take(page, "job-resumed")


def _docs(shots: Shots, page: Any, name: str) -> None:
    """A screenshot for the docs (docs/dashboard-NAME.png with CHORUS_DOCS_SHOTS=1)."""
    path = shots.take(page, f"dashboard-{name}")
    if os.environ.get("CHORUS_DOCS_SHOTS") == "1":
        docs = Path(__file__).resolve().parents[2] / "docs"
        shutil.copy(path, docs / path.name)


def _new_job(page: Any, dash: DashDaemon, prompt: str, **choices: str) -> str:
    """Start a job from the form (opened with its keyboard shortcut); its id."""
    page.keyboard.press("n")
    page.wait_for_selector("#new-job[open]")
    page.fill("#nj-prompt", prompt)
    page.select_option("#nj-body", "claude")
    page.fill("#nj-cwd", str(dash.work))
    page.select_option("#nj-mode", choices.get("mode", ""))
    if choices.get("worktree"):
        page.check("#nj-worktree")
    return _submit(page)


def _submit(page: Any) -> str:
    page.click("#nj-submit")
    page.wait_for_url("**/jobs/*")
    return str(page.url.rsplit("/", 1)[-1])


GREET = "def greet():\n    return 'hi'\n"


def test_a_job_started_from_the_form_is_a_conversation_with_tool_cards_and_a_diff(
    dash_with: Callable[..., DashDaemon], page: Any, shots: Shots
) -> None:
    dash = dash_with()
    target = dash.work / "greet.py"
    hostile = "<img src=x onerror=window.pwned=1> [click](javascript:window.pwned=2)"
    dash.server.script(
        [
            shell("echo from-the-form"),
            tool_call(
                "Write", {"file_path": str(target), "content": "def greet():\n    return 'hi'\n"}
            ),
            tool_call(
                "Edit", {"file_path": str(target), "old_string": "'hi'", "new_string": "'hello'"}
            ),
            slow_text(f"## Done\n\nI **wrote** `greet.py`. {hostile}", chunks=6, delay=0.1),
        ]
    )
    _login(page, dash)
    page.keyboard.press("n")
    page.wait_for_selector("#new-job[open]")
    page.fill("#nj-prompt", "write a greeting in greet.py")
    page.select_option("#nj-body", "claude")
    page.fill("#nj-cwd", str(dash.work))
    page.select_option("#nj-mode", "bypassPermissions")
    axe(page, "new job form")
    _docs(shots, page, "new-job")
    job_id = _submit(page)
    _ended(page)
    said = json.dumps([r.body for r in dash.server.turn_requests()])
    assert "write a greeting in greet.py" in said  # the scripted server got the prompt
    assert target.read_text() == GREET.replace("'hi'", "'hello'")
    # The conversation: the prompt, tool cards (the command, no raw JSON), the answer
    # as rendered markdown with the hostile parts inert.
    assert "write a greeting" in page.inner_text(".msg.you")
    card = page.locator(".msg.tool", has_text="echo from-the-form")
    assert card.locator(".summary").inner_text() == "$ echo from-the-form"
    assert "{" not in card.locator(".toolhead").inner_text()
    card.locator("summary").click()
    assert card.locator("pre.out").inner_text().strip() == "from-the-form"
    assert card.get_attribute("data-state") == "done"
    answer = page.locator(".msg.assistant.complete").last
    assert answer.locator("h2").inner_text() == "Done"
    assert answer.locator("strong").inner_text() == "wrote"
    assert answer.locator("img").count() == 0
    assert answer.locator("a").count() == 0  # the javascript: link stayed text
    assert page.evaluate("window.pwned") is None
    convo = page.inner_text("#conversation")
    assert "control_response" not in convo
    assert "requesting" not in convo  # status events are in the raw list only
    assert page.locator("#raw li.t-control_response").count() >= 1
    # The diff of the file the job wrote, coloured.
    diff = page.locator('details.file[data-path="greet.py"]')
    diff.wait_for()
    assert "+def greet():" in diff.inner_text()
    assert diff.locator(".dl.add .k").count() >= 1  # `def` is a keyword span
    assert "+'hello'" in diff.inner_text()  # the edit, after the write
    axe(page, "job page")
    _docs(shots, page, "job")
    page.set_viewport_size({"width": 390, "height": 844})  # a phone
    width = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
    assert width[0] <= width[1] + 1, width  # no sideways scrolling
    axe(page, "job page on a phone")
    shots.take(page, "job-phone")
    page.goto(f"{dash.base}/")
    page.wait_for_selector(f'tr[data-job="{job_id}"][data-status="done"]')
    axe(page, "jobs on a phone")
    page.set_viewport_size({"width": 1280, "height": 800})
    for name in ("", "flags", "teams", "routines", "health", "memory?q=x", "audit"):
        page.goto(f"{dash.base}/{name}")
        page.wait_for_selector("h1", state="attached")
        axe(page, name or "jobs")
    page.goto(f"{dash.base}/health")
    assert "Claude Code" in page.inner_text("#health")
    assert "@" not in page.inner_text("#health")  # no account fingerprints
    page.context.clear_cookies()
    page.goto(f"{dash.base}/")
    axe(page, "401")


def test_an_approval_is_answered_on_the_job_page_and_the_job_goes_on(
    dash_with: Callable[..., DashDaemon], page: Any, shots: Shots
) -> None:
    dash = dash_with()
    dash.server.script([shell("git push origin main"), text("pushed, or tried to"), text("spare")])
    _login(page, dash)
    job_id = _new_job(page, dash, "push the branch", mode="default")
    waiting = page.wait_for_selector("#waiting .card.k-approval", timeout=90_000)
    assert "git push origin main" in waiting.inner_text()
    page.wait_for_selector("#job-status.s-waiting")
    asking = page.locator('.msg.tool[data-state="asking"]', has_text="git push origin main")
    assert asking.locator(".tool-state").inner_text() == "waiting for you"
    listed = dash.run("jobs")
    assert "waiting" in listed.stdout, listed.stdout  # the CLI says the same
    axe(page, "job page with an approval")
    _docs(shots, page, "approval")
    page.click("#waiting .card.k-approval button.approve")
    _ended(page, 90_000)
    page.wait_for_selector("#job-status.s-done")
    card = page.locator(".msg.tool", has_text="git push origin main")
    assert card.get_attribute("data-state") in ("done", "failed")  # it ran (no repo here)
    said = json.dumps([r.body for r in dash.server.turn_requests()])
    assert "not a git repository" in said  # the model got the command's real output
    assert page.locator("#waiting .card").count() == 0
    assert dash.daemon.job(job_id)["state"] == "succeeded"


def _git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_a_worktree_job_is_reviewed_and_merged_from_its_page(
    dash_with: Callable[..., DashDaemon], page: Any, shots: Shots
) -> None:
    dash = dash_with()
    _git(dash.work, "init", "-q", "-b", "main")
    _git(dash.work, "config", "user.name", "Tester")
    _git(dash.work, "config", "user.email", "tester@example.com")
    (dash.work / "README").write_text("hello\n")
    _git(dash.work, "add", "README")
    _git(dash.work, "commit", "-q", "-m", "first")
    dash.server.script([shell("printf 'from the job\\n' > notes.md"), text("wrote notes.md")])
    _login(page, dash)
    job_id = _new_job(page, dash, "write notes", mode="bypassPermissions", worktree="yes")
    _ended(page, 90_000)
    diff = page.locator('details.file[data-path="notes.md"]')
    diff.wait_for()
    assert "+from the job" in diff.inner_text()
    assert not (dash.work / "notes.md").exists()  # not merged yet
    page.wait_for_selector("#merge:visible")
    axe(page, "worktree job")
    shots.take(page, "worktree-job")
    page.click("#merge")
    page.wait_for_selector("#worktree-bar:has-text('merged into main')")
    assert (dash.work / "notes.md").read_text() == "from the job\n"
    assert "notes.md" in _git(dash.work, "show", "--stat", "HEAD")
    until(lambda: page.locator("#merge").is_hidden())
    assert dash.daemon.job(job_id)["state"] == "succeeded"
