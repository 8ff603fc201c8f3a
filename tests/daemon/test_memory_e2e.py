"""Memory and context end to end on the real CLIs: memory and context reach every body, and a
body's ``memory_write`` call through Chorus's MCP server is remembered."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from chorus.daemon import stop_daemon
from chorus.events import JobEnded, MemoryChanged, parse_event
from chorus.policy import AuditLog
from chorus.store import SqliteStore
from chorus.testing import ModelServer, offline_env, slow_text, text, tool_call
from tests._wait import until
from tests.daemon.conftest import Daemon

pytestmark = pytest.mark.e2e
# The module's shared daemon: a context holds two memory items at most, so that an
# item only the prompt finds is told from the most recent ones.
SHARED_DAEMON_CONFIG = ("[memory]", "top_n = 2")

BODIES = ("claude", "codex", "gemini")


@pytest.fixture
def lanes(chorus_home: Path, tmp_path: Path) -> Iterator[tuple[ModelServer, Path]]:
    """Claude, Codex and Gemini on their own lanes of one scripted server; the work
    folder is a git repository (the project root of CHORUS.md)."""
    work = tmp_path / "repo" / "app"
    work.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(work.parent)], check=True)
    with ModelServer() as server:
        lines = ["[daemon]", "notifications = false", "[gateway]", "port = 0"]
        for cli in BODIES:
            env = offline_env(cli, tmp_path / f"{cli}-home", server.lane_url(cli))
            lines += [f"[agents.{cli}.env]", *(f"{k} = {json.dumps(v)}" for k, v in env.items())]
        chorus_home.mkdir(parents=True, exist_ok=True)
        (chorus_home / "config.toml").write_text("\n".join(lines) + "\n")
        yield server, work
        stop_daemon()
    assert server.errors == []


@pytest.fixture
def shared(shared_daemon: Daemon, tmp_path: Path) -> tuple[ModelServer, Path]:
    """The module's daemon (the three bodies on their lanes, as ``lanes`` configures
    them) and a work folder of this test's own in a git repository of its own: for a
    test whose checks hold whatever other tests of the module remembered before it."""
    work = tmp_path / "repo" / "app"
    work.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(work.parent)], check=True)
    return shared_daemon.server, work


def chorus(work: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "chorus", *args],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=work,
        env=os.environ.copy(),
    )


def ask(work: Path, body: str, prompt: str, *more: str) -> list[object]:
    done = chorus(work, "ask", prompt, "--body", body, "--json", *more)
    assert done.returncode == 0, done.stderr[-3000:]
    events = [parse_event(line) for line in done.stdout.splitlines()]
    assert isinstance(events[-1], JobEnded)
    assert events[-1].state == "succeeded", events[-1]
    return events


async def _session_events(session_id: str) -> list[object]:
    async with SqliteStore() as store:
        return list(await store.read_events(session_id))


def first_request(server: ModelServer, lane: str) -> str:
    """Everything the CLI sent in its first model request of the test, as text."""
    return json.dumps(server.turn_requests(lane=lane)[0].body, ensure_ascii=False)


@pytest.mark.parametrize("body", BODIES)
def test_a_fact_added_on_the_cli_reaches_a_new_session_of_each_body(
    shared: tuple[ModelServer, Path], body: str
) -> None:
    server, work = shared
    added = chorus(work, "memory", "add", "The user's favourite colour is teal", "--type", "fact")
    assert added.returncode == 0, added.stderr
    server.script([text("noted")], lane=body)
    ask(work, body, "what do you know about me?")
    sent = first_request(server, body)
    assert "The user's favourite colour is teal" in sent
    assert "## Identity (SOUL.md)" in sent
    Path(f"/tmp/req-{body}.json").write_text(sent)
    # Chorus's MCP server is there (Claude and Codex defer MCP tools: Claude lists
    # them by name, Codex finds them with tool_search, the test below calls one).
    assert MEMORY_WRITE[body] in sent or body == "codex"


# The MCP tool as each CLI names it to the model.
MEMORY_WRITE = {
    "claude": "mcp__chorus__memory_write",
    "codex": "mcp__chorus__memory_write",
    "gemini": "mcp_chorus_memory_write",
}
# Codex defers MCP tools behind tool_search; a model then calls them by namespace.
NAMESPACE = {"codex": "mcp__chorus"}
# A decision each body remembers, and the words that find it: unlike each other, since
# the bodies share the module's memory and a near-copy would reinforce the first.
DECISIONS = {
    "claude": ("The deploy window is Tuesday 14:00 UTC", "deploy window"),
    "codex": ("Database migrations run only on Sunday nights", "database migrations"),
    "gemini": ("The release freeze starts every December 15th", "release freeze"),
}


@pytest.mark.parametrize("body", BODIES)
def test_a_memory_write_call_is_searchable_and_in_the_next_context(
    shared: tuple[ModelServer, Path], body: str
) -> None:
    server, work = shared
    fact, query = DECISIONS[body]
    server.script(
        [
            tool_call(
                "memory_write" if body in NAMESPACE else MEMORY_WRITE[body],
                {"text": fact, "kind": "decision"},
                namespace=NAMESPACE.get(body),
            ),
            text("saved it"),
            text("fresh session"),
        ],
        lane=body,
    )
    events = ask(work, body, "remember the decision")
    session_id = events[0].session_id  # type: ignore[attr-defined]
    result = server.turn_requests(lane=body)[1].last_tool_result()
    assert result is not None
    assert not result.is_error, result.content
    assert '"op": "add"' in result.content, result.content
    found = chorus(work, "memory", "search", query, "--json")
    hits = [h for h in json.loads(found.stdout) if h["text"] == fact]
    assert len(hits) == 1, found.stdout
    assert hits[0]["item"]["source_kind"] == "agent"
    # The daemon ran the tool (the body is sandboxed) and audited the call: once, for
    # this session (an earlier test's calls are its own sessions').
    audited = [e for e in AuditLog().entries() if e.kind == "mcp_tool_call"]
    mine = [(e.data["tool"], e.data["ok"]) for e in audited if e.session_id == session_id]
    assert mine == [("memory_write", True)]
    # The write is also an event in the calling session's log.
    logged = asyncio.run(_session_events(session_id))
    writes = [(e.op, e.item_id) for e in logged if isinstance(e, MemoryChanged)]
    assert writes == [("add", hits[0]["item"]["id"])]
    ask(work, body, "anything planned?")
    assert fact in json.dumps(server.turn_requests(lane=body)[2].body)


@pytest.mark.parametrize("body", BODIES)
def test_chorus_md_imports_reach_the_body_and_an_escaping_one_does_not(
    shared: tuple[ModelServer, Path], body: str
) -> None:
    server, work = shared
    (work.parent.parent / "outside.md").write_text("OUTSIDE-SECRET-9137\n")
    (work / "docs").mkdir()
    (work / "docs" / "conventions.md").write_text("Convention: name branches feat/<topic>.\n")
    (work / "CHORUS.md").write_text("Project Zephyr.\n@docs/conventions.md\n@../../outside.md\n")
    server.script([text("ok")], lane=body)
    ask(work, body, "start")
    sent = first_request(server, body)
    assert "Project Zephyr." in sent
    assert "Convention: name branches feat/<topic>." in sent
    assert "OUTSIDE-SECRET-9137" not in sent
    assert "import refused: @../../outside.md" in sent


def test_extraction_at_job_end_remembers_what_the_job_settled(
    lanes: tuple[ModelServer, Path], chorus_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On by default, and in the background: the extraction run (Codex's one-shot
    mode here, slow on purpose) does not hold the session, whose next job ends
    first; the item lands afterwards."""
    server, work = lanes
    monkeypatch.delenv("CHORUS_MEMORY_EXTRACTION")  # the default: on
    with (chorus_home / "config.toml").open("a") as config:
        config.write('[memory]\nextraction_body = "codex-exec"\n')
    item = {"kind": "preference", "text": "The user wants pnpm instead of npm", "importance": 0.9}
    server.script([text("Sure, pnpm from now on."), text("next job done")], lane="claude")
    reply = f"```json\n{json.dumps([item])}\n```"
    server.script([slow_text(reply, chunks=30, delay=0.4)], lane="codex")
    first = ask(work, "claude", "From now on use pnpm, not npm.")
    ask(work, "claude", "and now?", "--session", first[0].session_id)  # type: ignore[attr-defined]
    assert not any(r.finished for r in server.turn_requests(lane="codex")), "session was held"
    deadline = time.monotonic() + 90
    hits: list[dict[str, object]] = []
    while not hits and time.monotonic() < deadline:
        found = chorus(work, "memory", "search", "pnpm npm", "--json")
        hits = [h for h in json.loads(found.stdout) if h["source"] == "item"]
        time.sleep(0.5)
    assert hits, "the extracted item never appeared"
    assert hits[0]["text"] == item["text"]
    assert hits[0]["item"]["source_kind"] == "extraction"  # type: ignore[index]
    job_request = server.turn_requests(lane="claude")[0]
    assert "# Context from Chorus" in json.dumps(job_request.body)

    # Each job's end starts an extraction; under load the second job's can reach
    # the server first and take the one scripted answer (the first job's then gets
    # the "scenario exhausted" text): the first job's is the one that carries its
    # words, whichever answer it got.
    def first_jobs_run() -> str:
        asked = [*server.requests_of("turn", lane="codex")]
        asked += server.requests_of("exhausted", lane="codex")
        runs = [json.dumps(r.body) for r in asked]
        return next((run for run in runs if "From now on use pnpm" in run), "")

    until(lambda: bool(first_jobs_run()), timeout=90)
    sent = first_jobs_run()
    assert "USER: From now on use pnpm, not npm." in sent, sent[-2000:]
    assert "ASSISTANT: Sure, pnpm from now on." in sent
    assert "# Context from Chorus" not in sent


def _remember(work: Path, *facts: str) -> None:
    """Add ``facts`` oldest first (each later one is more recent)."""
    for fact in facts:
        added = chorus(work, "memory", "add", fact, "--type", "fact")
        assert added.returncode == 0, added.stderr
        time.sleep(0.01)


FILLERS = (
    "The office plant is a ficus",
    "The team lunch is on Thursdays",
    "The release notes go in CHANGES.md",
)


@pytest.mark.parametrize("body", BODIES)
def test_the_first_jobs_context_has_the_items_relevant_to_its_prompt(
    shared: tuple[ModelServer, Path], body: str
) -> None:
    """The body starts with the job's prompt as its task: an older item the prompt
    finds is in its context, though the two most recent items would fill top_n. (An
    item added again is seen again: the fillers are the most recent for every body.)"""
    server, work = shared
    _remember(work, "The staging database runs on host db-staging-7", *FILLERS)
    server.script([text("on db-staging-7")], lane=body)
    ask(work, body, "which host runs the staging database?")
    sent = first_request(server, body)
    # Not among the two most recent (what a context without the task would hold).
    assert "The staging database runs on host db-staging-7" in sent


@pytest.mark.parametrize("body", BODIES)
def test_a_warm_bodys_next_job_gets_the_memory_relevant_to_its_prompt(
    lanes: tuple[ModelServer, Path], chorus_home: Path, body: str
) -> None:
    """The second job runs on the warm body of the first: the items its prompt finds
    that the body's context did not have come in a small block before the prompt;
    an item already in the context is not repeated. (A daemon of its own: the block
    holds only what this test remembered.)"""
    server, work = lanes
    with (chorus_home / "config.toml").open("a") as config:
        config.write("[memory]\ntop_n = 2\n")
    codename = "The release codename is Bluefin"
    _remember(work, codename, *FILLERS)
    server.script([text("hello"), text("Bluefin")], lane=body)
    first = ask(work, body, "say hello")
    session_id = first[0].session_id  # type: ignore[attr-defined]
    ask(work, body, "what is the release codename?", "--session", session_id)
    requests = server.turn_requests(lane=body)
    assert codename not in json.dumps(requests[0].body)  # not among the most recent
    sent = json.dumps(requests[1].body, ensure_ascii=False)
    start = sent.index("[Chorus: relevant memory for this message]")
    block = sent[start : sent.index("what is the release codename?", start)]
    assert codename in block
    assert "The release notes go in CHANGES.md" not in block  # in the context already
    assert "The release notes go in CHANGES.md" in json.dumps(requests[0].body)
    started = [e for e in asyncio.run(_session_events(session_id)) if e.type == "session_started"]  # type: ignore[attr-defined]
    assert len(started) == 1  # one warm body served both jobs
