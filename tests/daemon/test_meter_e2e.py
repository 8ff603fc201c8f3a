"""The model-API meter on the real CLIs: every body's model calls go through the
daemon's meter on its way to the scripted server. A Codex job and a Gemini job show in
``chorus usage`` exactly the tokens the server sent, priced from the table; ``status``
shows the requests left that the server stated; a per-job budget smaller than one
request's cost stops a multi-step job after its first model request."""

from __future__ import annotations

import json
import os
import signal
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest

from chorus.client._lifecycle import read_pid
from chorus.daemon import is_responding
from chorus.events import (
    JobEnded,
    Metered,
    Notice,
    TextDelta,
    TurnCompleted,
    Usage,
    parse_event,
)
from chorus.meter import price_table
from chorus.testing import shell, slow_text, text

if TYPE_CHECKING:
    from conftest import Daemon

pytestmark = pytest.mark.e2e

#: What the scripted server states on every answer (its rate limit: requests a minute).
LIMIT = 500
#: The usage the scripted server puts on every answer, per API.
SENT = Usage(input_tokens=100, output_tokens=20)


def _up(daemon: Daemon, within: float = 240) -> None:
    """The daemon answers (started here when none runs: a start slower than the CLI's
    20 s wait, on a loaded machine, is waited for rather than failed)."""
    deadline = time.monotonic() + within
    while daemon.run("start").returncode != 0 and not is_responding(2.0):
        assert time.monotonic() < deadline, "the daemon never answered"
        time.sleep(1.0)


def _answered(daemon: Daemon, lane: str) -> list[str]:
    """The model of each request the server answered with its usage, on ``lane``."""
    return [
        str(r.body.get("model") if r.api == "openai" else r.path.split("/models/")[1].split(":")[0])
        for r in daemon.server.requests_of(lane=lane)
        if r.method == "POST" and r.status == 200 and not r.path.endswith(":countTokens")
    ]


def test_codex_and_gemini_jobs_are_metered_as_the_server_sent_them(
    daemon_with: Callable[..., Daemon],
) -> None:
    daemon = daemon_with()
    daemon.server.state_rate_limit(LIMIT)
    daemon.server.script([shell("echo metered > out.txt"), text("done")], lane="codex")
    daemon.server.script([text("hello from gemini")], lane="gemini")
    _up(daemon)
    codex = daemon.ask("make out.txt", "--body", "codex")
    gemini = daemon.ask("say hello", "--body", "gemini")
    assert (daemon.work / "out.txt").read_text() == "metered\n"

    rows = {r["key"]: r for r in json.loads(daemon.run("usage", "--json").stdout)}
    table = price_table()
    for body, events in (("codex", codex), ("gemini", gemini)):
        models = _answered(daemon, body)
        assert models, body
        row = rows[body]
        assert row["requests"] == len(models)
        assert row["input_tokens"] == SENT.input_tokens * len(models)
        assert row["output_tokens"] == SENT.output_tokens * len(models)
        cost = sum(table.cost(model, SENT) or 0 for model in models)
        assert cost > 0
        assert row["cost_usd"] == pytest.approx(cost)
        metered = _metered(daemon, events)
        assert {m.job_id for m in metered} == {events[-1].job_id}
        assert all(m.complete and m.status == 200 for m in metered)

    status = json.loads(daemon.run("status", "--json").stdout)
    stated = status["quota"]["openai"]["windows"]["requests"]
    assert stated["limit"] == LIMIT
    assert stated["remaining"] == daemon.server.rate_limit_left("openai")
    assert stated["remaining"] == LIMIT - len(_answered(daemon, "codex"))
    assert status["spend_today"]["usd"] == pytest.approx(
        rows["codex"]["cost_usd"] + rows["gemini"]["cost_usd"]
    )
    plain = daemon.run("status").stdout
    left = f"requests {stated['remaining']}/{LIMIT} left"
    assert any(
        line.strip().startswith("quota (openai") and left in line for line in plain.splitlines()
    )


def test_a_metered_claude_job_counts_the_meters_cost_not_also_its_own_report(
    daemon_with: Callable[..., Daemon],
) -> None:
    daemon = daemon_with()
    daemon.server.script([text("hi")], lane="claude")
    _up(daemon)
    events = daemon.ask("hello", "--body", "claude")
    turn = next(e for e in events if isinstance(e, TurnCompleted))
    assert turn.cost_usd  # Claude reported its own cost of the turn
    metered = _metered(daemon, events)
    posts = [r for r in daemon.server.requests_of(lane="claude") if r.method == "POST"]
    assert len(metered) == len(posts)
    [row] = json.loads(daemon.run("usage", "--json").stdout)
    assert (row["key"], row["turns"], row["requests"]) == ("claude", 1, len(posts))
    assert row["input_tokens"] == SENT.input_tokens * len(posts)
    assert row["cost_usd"] == pytest.approx(sum(m.cost_usd or 0 for m in metered))
    status = json.loads(daemon.run("status", "--json").stdout)
    assert status["spend_today"]["usd"] == pytest.approx(row["cost_usd"])


def _metered(daemon: Daemon, events: list[object]) -> list[Metered]:
    job = events[-1].job_id  # type: ignore[attr-defined]
    done = daemon.run("log", job, "--json")
    found = [parse_event(line) for line in done.stdout.splitlines()]
    return [e for e in found if isinstance(e, Metered)]


@pytest.mark.parametrize("body", ["codex", "gemini", "claude"])
def test_a_budget_smaller_than_one_request_stops_the_job_after_that_request(
    daemon_with: Callable[..., Daemon], body: str
) -> None:
    daemon = daemon_with("[budget]", "per_job_usd = 0.00001")
    daemon.server.script(
        [shell("echo one > one.txt"), shell("echo two > two.txt"), text("never")], lane=body
    )
    _up(daemon)
    done = daemon.run("ask", "two steps", "--body", body, "--json")
    assert done.returncode == 1, done.stderr
    events = [parse_event(line) for line in done.stdout.splitlines()]
    ended = events[-1]
    assert isinstance(ended, JobEnded)
    assert ended.error is not None
    assert ended.error.code == "budget_exceeded"
    assert "per_job_usd" in ended.error.message
    notices = [e for e in events if isinstance(e, Notice)]
    assert notices[-1].kind == "budget"  # after the CLI's own word on the 400, if any
    sent = [r for r in daemon.server.requests_of(lane=body) if r.method == "POST"]
    assert len(sent) == 1  # one model request went out; the next was refused
    # Gemini's first request is its router's (a side call): its turn never started.
    assert (daemon.work / "one.txt").exists() == (sent[0].kind == "turn")
    assert not (daemon.work / "two.txt").exists()


@pytest.mark.parametrize("body", ["claude", "codex", "gemini"])
def test_a_secret_the_model_reads_never_reaches_the_provider_yet_its_tool_gets_it(
    daemon_with: Callable[..., Daemon], body: str
) -> None:
    daemon = daemon_with()
    value = "dtk-" + uuid.uuid4().hex
    # A credential of the config ([agents.*.env], the last table of the file): a vault
    # secret's value in a tool's input is refused by the policy (exfil.secret_value).
    with (daemon.home / "config.toml").open("a") as config:
        config.write(f"DEPLOY_TOKEN = {json.dumps(value)}\n")
    (daemon.work / "notes.txt").write_text(f"deploy token: {value}\n")
    daemon.server.script(
        [
            shell("cat notes.txt"),
            shell("echo [SECRET:DEPLOY_TOKEN] > out.txt"),
            text("wrote [SECRET:DEPLOY_TOKEN] to out.txt"),
        ],
        lane=body,
    )
    _up(daemon)
    events = daemon.ask("deploy with the token in notes.txt", "--body", body)
    assert (daemon.work / "out.txt").read_text() == value + "\n"  # the tool got the value
    sent = daemon.server.requests_of(lane=body)
    assert sent
    for request in sent:  # the provider never saw it: bodies, headers, paths
        assert value not in json.dumps(request.body)
        assert value not in json.dumps(request.headers)
        assert value not in request.path
    seen = [r for r in sent if "[SECRET:DEPLOY_TOKEN]" in json.dumps(r.body)]
    assert seen  # the model read the file's placeholder
    turn = next(e for e in events if isinstance(e, TurnCompleted))
    assert "wrote [SECRET:DEPLOY_TOKEN]" in (turn.result or "")  # its text keeps it


def test_a_request_in_flight_when_the_daemon_is_killed_finishes_and_is_metered_later(
    daemon_with: Callable[..., Daemon],
) -> None:
    daemon = daemon_with()
    words = " ".join(f"w{i}" for i in range(40))
    daemon.server.script([slow_text(words, chunks=40, delay=0.25)], lane="codex")
    _up(daemon)
    job = daemon.run("task", "survive", "--body", "codex").stdout.strip()
    deadline = time.monotonic() + 90
    while sum(isinstance(e, TextDelta) for e in daemon.client.events(job, follow=False)) < 3:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    pid = read_pid()
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    meter = json.loads((daemon.home / "run" / "meter" / "pid").read_text())
    _up(daemon)
    watched = daemon.run("watch", job)  # a new daemon re-adopts the meter's process
    assert watched.returncode == 0, watched.stdout[-2000:] + watched.stderr[-2000:]
    assert json.loads((daemon.home / "run" / "meter" / "pid").read_text()) == meter
    posts = [r for r in daemon.server.requests_of(lane="codex") if r.method == "POST"]
    assert len(posts) == 1  # the turn's one request was not cut and run again
    assert posts[0].finished
    assert not posts[0].disconnected
    [row] = json.loads(daemon.run("usage", "--json").stdout)
    assert (row["key"], row["requests"]) == ("codex", 1)
    assert row["input_tokens"] == SENT.input_tokens
