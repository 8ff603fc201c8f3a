"""Failover between real CLIs on quota, with a handoff bundle."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from chorus.daemon import DaemonClient, stop_daemon
from chorus.events import Handoff, JobEnded, Notice, Routed
from chorus.testing import ModelServer, error, offline_env, shell, text
from chorus.testing._anthropic import regain_date
from tests._wait import until

pytestmark = pytest.mark.e2e

ROUTER = """[router]
bodies = ["claude", "codex"]
cooldown_base_s = 1.0
cooldown_max_s = 2.0
rate_limit_delay_s = 0.2
notify_on_failover = false
"""


@pytest.fixture
def lanes(chorus_home: Path, tmp_path: Path) -> Iterator[tuple[ModelServer, Path]]:
    """Claude and Codex on separate lanes of one scripted server, both configured."""
    work = tmp_path / "work"
    work.mkdir()
    with ModelServer() as server:
        lines = ["[daemon]", "notifications = false", ROUTER]
        for cli in ("claude", "codex"):
            env = offline_env(cli, tmp_path / f"{cli}-home", server.lane_url(cli))
            lines.append(f"[agents.{cli}.env]")
            lines += [f"{k} = {json.dumps(v)}" for k, v in env.items()]
        chorus_home.mkdir(parents=True, exist_ok=True)
        (chorus_home / "config.toml").write_text("\n".join(lines) + "\n")
        yield server, work
        stop_daemon()
    assert server.errors == []


def _ask(
    work: Path, prompt: str, *more: str
) -> tuple[subprocess.CompletedProcess[str], list[object]]:
    result = subprocess.run(
        [sys.executable, "-m", "chorus", "ask", prompt, "--body", "claude", "--json", *more],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=work,
        env=os.environ.copy(),
    )
    from chorus.events import parse_event

    return result, [parse_event(line) for line in result.stdout.splitlines()]


def test_quota_mid_task_fails_over_to_codex_with_a_handoff_bundle(
    lanes: tuple[ModelServer, Path],
) -> None:
    server, work = lanes
    server.script([shell("echo one > one.txt"), error("quota", times=None)], lane="claude")
    server.script([shell("echo two > two.txt"), text("finished the rest")], lane="codex")
    result, events = _ask(work, "Write one.txt and then two.txt")
    assert result.returncode == 0, result.stderr
    assert (work / "one.txt").read_text() == "one\n"
    assert (work / "two.txt").read_text() == "two\n"
    handoffs = [e for e in events if isinstance(e, Handoff)]
    assert [(h.from_body, h.to_body, h.reason.code) for h in handoffs] == [
        ("claude", "codex", "quota_exhausted")
    ]
    first_codex = server.turn_requests(lane="codex")[0].last_user_text() or ""
    assert "Write one.txt and then two.txt" in first_codex  # the original task
    assert "one.txt" in first_codex.split("## Files touched")[1]  # what is done already
    assert "quota_exhausted" in first_codex  # the failure reason
    assert "Resume note" in first_codex
    ended = events[-1]
    assert isinstance(ended, JobEnded)
    assert ended.state == "succeeded"
    health = {h["key"].split("@")[0]: h for h in DaemonClient().status()["health"]}
    assert health["claude"]["quota_state"] == "exhausted"
    assert health["claude"]["key"].startswith("claude@")  # per body and credential
    # The API said "regain access on <first of next month> at 00:00 UTC": that is the
    # cooldown, not the configured 1 s backoff.
    regain = datetime.fromisoformat(regain_date()).replace(tzinfo=UTC).timestamp()
    assert health["claude"]["cooldown_until"] == regain
    assert health["claude"]["reset_from_provider"] is True


def test_all_bodies_exhausted_waits_for_cooldown_then_completes(
    lanes: tuple[ModelServer, Path],
) -> None:
    server, work = lanes
    server.script([error("quota"), text("claude is back")], lane="claude")
    server.script([error("quota")], lane="codex")
    result, events = _ask(work, "Say something when you can")
    assert result.returncode == 0, result.stderr
    kinds = [e.kind for e in events if isinstance(e, Notice)]
    assert "waiting" in kinds
    assert [h.to_body for h in events if isinstance(h, Handoff)] == ["codex"]
    ended = events[-1]
    assert isinstance(ended, JobEnded)
    assert (ended.state, ended.result) == ("succeeded", "claude is back")
    assert len(server.turn_requests(lane="claude")) == 2


def test_rate_limit_is_retried_on_the_same_body_before_any_failover(
    lanes: tuple[ModelServer, Path],
) -> None:
    server, work = lanes
    server.script([error("rate_limit"), text("fine after a retry")], lane="claude")
    result, events = _ask(work, "Be patient")
    assert result.returncode == 0, result.stderr
    assert not [e for e in events if isinstance(e, Handoff)]
    assert any(isinstance(e, Notice) and e.kind == "retry" for e in events)
    assert server.turn_requests(lane="codex") == []
    ended = events[-1]
    assert isinstance(ended, JobEnded)
    assert ended.result == "fine after a retry"


def test_no_failover_fails_on_quota_and_the_route_says_so(
    lanes: tuple[ModelServer, Path],
) -> None:
    """``--no-failover``: a quota error fails the job on its body (no handoff), and the
    job's ``routed`` event (first in its log) says why it ran there."""
    server, work = lanes
    server.script([error("quota", times=None)], lane="claude")
    result, events = _ask(work, "Say hello", "--no-failover")
    assert result.returncode == 1, result.stderr
    assert not [e for e in events if isinstance(e, Handoff)]
    routed = [e for e in events if isinstance(e, Routed)]
    assert [(r.to_body, r.reason, r.failover) for r in routed] == [
        ("claude", "asked for with --body", False)
    ]
    assert events.index(routed[0]) == 0
    ended = events[-1]
    assert isinstance(ended, JobEnded)
    assert ended.error is not None
    assert ended.error.code == "quota_exhausted"
    assert server.turn_requests(lane="codex") == []
    log = subprocess.run(
        [sys.executable, "-m", "chorus", "log", ended.job_id or ""],
        capture_output=True, text=True, timeout=60, cwd=work, env=os.environ.copy(),
    )  # fmt: skip
    assert "routed to claude: asked for with --body (no failover)" in log.stdout


def test_an_auth_error_fails_over_like_a_quota_error(lanes: tuple[ModelServer, Path]) -> None:
    server, work = lanes
    server.script([error("auth", times=None)], lane="claude")
    server.script([shell("echo done > done.txt"), text("finished")], lane="codex")
    result, events = _ask(work, "Write done.txt")
    assert result.returncode == 0, result.stderr
    assert (work / "done.txt").read_text() == "done\n"
    handoffs = [e for e in events if isinstance(e, Handoff)]
    assert [(h.from_body, h.to_body, h.reason.code) for h in handoffs] == [
        ("claude", "codex", "auth")
    ]
    stopped, events = _ask(work, "Write again", "--no-failover")
    assert stopped.returncode == 1  # --no-failover still stops it
    assert not [e for e in events if isinstance(e, Handoff)]


def test_a_body_without_a_login_is_never_routed_to(
    chorus_home: Path, tmp_path: Path, lanes: tuple[ModelServer, Path]
) -> None:
    server, work = lanes
    empty_home = tmp_path / "gemini-home-without-login"
    empty_home.mkdir()
    config = chorus_home / "config.toml"
    text_ = config.read_text().replace(
        'bodies = ["claude", "codex"]', 'bodies = ["gemini", "codex"]'
    )
    config.write_text(text_ + f'[agents.gemini.env]\nHOME = "{empty_home}"\n')
    server.script([text("routed here")], lane="codex")
    env = {k: v for k, v in os.environ.items() if k not in ("GEMINI_API_KEY", "GOOGLE_API_KEY")}
    argv = [sys.executable, "-m", "chorus", "ask", "Summarize this huge log file", "--json"]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=work, env=env)
    assert result.returncode == 0, result.stderr
    from chorus.events import parse_event

    routed = [e for e in map(parse_event, result.stdout.splitlines()) if isinstance(e, Routed)]
    assert routed[0].to_body == "codex"
    assert any(s.startswith("gemini: needs login") for s in routed[0].skipped)
    status = DaemonClient().status()
    assert status["needs_login"]["gemini"].startswith("needs login: set GEMINI_API_KEY")


def _chorus(work: Path, *args: str) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "chorus", *args],
        capture_output=True, text=True, timeout=60, cwd=work, env=os.environ.copy(),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_the_body_that_finished_is_credited_and_the_one_it_left_is_shown(
    lanes: tuple[ModelServer, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Claude runs out of quota, Codex finishes: the job's end, its record (``jobs``,
    ``jobs --json``), ``usage`` and the router's success stats credit Codex, and both
    names are shown."""
    server, work = lanes
    monkeypatch.setenv("COLUMNS", "200")  # the tables' cells stay on one line
    server.script([error("quota", times=None)], lane="claude")
    server.script([text("codex finished it")], lane="codex")
    result, events = _ask(work, "Finish this on whichever body can")
    assert result.returncode == 0, result.stderr
    ended = events[-1]
    assert isinstance(ended, JobEnded)
    assert (ended.state, ended.result) == ("succeeded", "codex finished it")
    assert (ended.body, ended.failed_over_from) == ("codex", ["claude"])
    rows = {r["id"]: r for r in json.loads(_chorus(work, "jobs", "--json"))}
    row = rows[ended.job_id or ""]
    assert (row["body"], row["failed_over_from"]) == ("codex", ["claude"])
    line = next(x for x in _chorus(work, "jobs").splitlines() if "Finish this" in x)
    assert "codex (after claude)" in line
    usage = {r["key"]: r for r in json.loads(_chorus(work, "usage", "--json"))}
    assert usage["codex"]["turns"] == 1
    assert usage.get("claude", {"turns": 0})["turns"] == 0
    health = {h["key"].split("@")[0]: h for h in DaemonClient().status()["health"]}
    assert health["codex"]["outcomes"] == [True]  # the success is Codex's
    assert health["claude"]["outcomes"] == [False]
    _check_metrics_credit_codex()
    _check_the_session_lists_codexs_model(work, ended.session_id or "")


def _metrics() -> dict[str, float]:
    status, raw = DaemonClient().request("GET", "/metrics")
    assert status == 200
    lines = [x for x in raw.decode().splitlines() if x and not x.startswith("#")]
    return {name: float(value) for name, value in (x.rsplit(" ", 1) for x in lines)}


def _check_metrics_credit_codex() -> None:
    """The jobs metric counts the job once, for Codex; the failover series names both."""
    done = 'chorus_jobs_total{body="codex",state="succeeded"}'
    until(lambda: _metrics().get(done) == 1.0, timeout=60)  # fed off the log
    samples = _metrics()
    assert 'chorus_jobs_total{body="claude",state="succeeded"}' not in samples
    assert samples['chorus_failovers_total{from_body="claude",to_body="codex"}'] == 1.0


def _check_the_session_lists_codexs_model(work: Path, session_id: str) -> None:
    """After the failover, ``sessions list`` shows the model of the body that finished."""
    logged = json.loads(_chorus(work, "sessions", "show", session_id, "--json"))["events"]
    started = [e for e in logged if e["type"] == "session_started" and e["body"] == "codex"]
    model = started[-1]["model"]
    assert model
    rows = {r["id"]: r for r in json.loads(_chorus(work, "sessions", "list", "--json"))}
    row = rows[session_id]
    assert (row["body"], row["active_body"], row["model"]) == ("claude", "codex", model)
    line = next(x for x in _chorus(work, "sessions", "list").splitlines() if session_id[:8] in x)
    assert "codex (after claude)" in line, line
    assert model in line, line
