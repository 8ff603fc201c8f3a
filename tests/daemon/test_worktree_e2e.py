"""Jobs in their own git worktrees, end to end: the real ``chorus`` CLI, the daemon,
and the real Claude Code CLI against the scripted model server."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from chorus.daemon import stop_daemon
from chorus.events import Handoff, JobEnded, Worktree, parse_event
from chorus.testing import ModelServer, error, offline_env, shell, slow_text, text
from tests._repo import git, make_repo
from tests._wait import until

if TYPE_CHECKING:
    from conftest import Chorus

pytestmark = pytest.mark.e2e

#: Each job writes a file named after its own folder (the job id) once both jobs
#: are inside their shell call at the same time (a barrier folder both may write:
#: proof that they run at once, and each job's next model turn comes after both
#: took their shell turn from the shared script).
WRITE_OWN_FILE = (
    'n=$(basename "$PWD"); touch "{barrier}/$n"; '
    'for i in $(seq 150); do [ "$(ls {barrier} | wc -l)" -ge 2 ] && break; sleep 0.2; done; '
    'echo "from $n" > "job-$n.txt"'
)


def allow_barrier(chorus: Chorus) -> Path:
    """A folder both jobs may write, besides their own worktree (policy.toml)."""
    barrier = chorus.home.parent / "barrier"
    barrier.mkdir()
    (chorus.home / "policy.toml").write_text(
        f'version = 1\n[filesystem]\nallowed_paths = ["{{cwd}}", "{barrier}"]\n'
    )
    return barrier


def _worktrees(chorus: Chorus) -> dict[str, dict[str, Any]]:
    listed = chorus.run("worktree", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    return {row["job_id"]: row for row in json.loads(listed.stdout)}


def _events(chorus: Chorus, job_id: str) -> list[Any]:
    logged = chorus.run("log", job_id, "--json")
    assert logged.returncode == 0, logged.stderr
    return [parse_event(line) for line in logged.stdout.splitlines()]


def test_two_jobs_in_their_own_worktrees_then_merge_and_a_refused_rm(chorus: Chorus) -> None:
    make_repo(chorus.work)
    command = WRITE_OWN_FILE.format(barrier=allow_barrier(chorus))
    chorus.server.script(
        [
            shell(command),
            shell(command),
            slow_text("done", chunks=4, delay=0.2),
            slow_text("done", chunks=4, delay=0.2),
        ]
    )
    # The command's paths are computed at run time ($n), which the policy asks about
    # in the default mode; bypass lets it run (the sandbox still holds the jobs).
    bypass = ("--permission-mode", "bypassPermissions")
    one = chorus.run("task", "write your file\nplease", "--body", "claude", "--worktree", *bypass)
    two = chorus.run("task", "write yours too", "--body", "claude", "--worktree", *bypass)
    assert one.returncode == 0, one.stderr
    assert two.returncode == 0, two.stderr
    ids = [one.stdout.strip(), two.stdout.strip()]
    for job_id in ids:
        watched = chorus.run("watch", job_id)
        assert watched.returncode == 0, watched.stdout + watched.stderr
    jobs = [chorus.client.job(i) for i in ids]
    # They ran at once (the barrier let neither write before both were there).
    assert jobs[0]["started_at"] < jobs[1]["ended_at"]
    assert jobs[1]["started_at"] < jobs[0]["ended_at"]
    assert sorted(p.name for p in (chorus.home.parent / "barrier").iterdir()) == sorted(ids)

    rows = _worktrees(chorus)
    for job_id in ids:
        row, path = rows[job_id], Path(rows[job_id]["path"])
        assert path.parent.parent == chorus.home.resolve() / "worktrees"
        assert row["branch"].startswith(f"chorus/{job_id[:8]}-write-")
        assert (row["state"], row["ahead"], row["dirty"]) == ("ready", 1, 0)
        # Its own file, in its own worktree, committed on its own branch by Chorus.
        assert (path / f"job-{job_id}.txt").read_text() == f"from {job_id}\n"
        assert sorted(p.name for p in path.glob("job-*.txt")) == [f"job-{job_id}.txt"]
        assert git(path, "status", "--porcelain") == ""
    assert git(Path(rows[ids[0]]["path"]), "log", "--format=%s", "-1") == "write your file"
    assert not list(chorus.work.glob("job-*.txt"))  # the main checkout was not touched
    actions = [e.action for e in _events(chorus, ids[0]) if isinstance(e, Worktree)]
    assert actions == ["created", "locked", "committed", "unlocked"]

    merged = chorus.run("worktree", "merge", ids[0][:10])
    assert merged.returncode == 0, merged.stderr
    assert (chorus.work / f"job-{ids[0]}.txt").read_text() == f"from {ids[0]}\n"
    assert git(chorus.work, "rev-parse", "--abbrev-ref", "HEAD") == "main"

    refused = chorus.run("worktree", "rm", ids[1])
    assert refused.returncode == 2
    assert "1 unmerged commit" in refused.stderr
    assert "write yours too" in refused.stderr  # the commit it would lose, listed
    assert Path(rows[ids[1]]["path"]).is_dir()

    shown = chorus.run("worktree", "diff", ids[1])
    assert shown.returncode == 0, shown.stderr
    assert f"+from {ids[1]}" in shown.stdout

    removed = chorus.run("worktree", "rm", ids[0])
    assert removed.returncode == 0, removed.stderr
    after = _worktrees(chorus)
    assert (after[ids[0]]["state"], after[ids[1]]["state"]) == ("removed", "ready")
    assert not Path(rows[ids[0]]["path"]).exists()
    pruned = json.loads(chorus.run("worktree", "prune", "--json").stdout)
    assert pruned["removed"] == []
    assert [k["job_id"] for k in pruned["kept"]] == [ids[1]]
    assert Path(rows[ids[1]]["path"]).is_dir()


def test_a_follow_up_job_of_the_session_resumes_in_the_same_worktree(shared_chorus: Chorus) -> None:
    chorus = shared_chorus
    make_repo(chorus.work)
    chorus.server.script(
        [text("remembered: blue"), shell("echo again > again.txt"), text("second done")]
    )
    first = chorus.run("ask", "remember blue", "--body", "claude", "--worktree", "--json")
    assert first.returncode == 0, first.stderr
    job = json.loads(first.stdout.splitlines()[-1])
    session = chorus.client.job(job["job_id"])["session_id"]
    second = chorus.run("ask", "write again.txt", "--session", session, "--json")
    assert second.returncode == 0, second.stderr
    path = Path(_worktrees(chorus)[job["job_id"]]["path"])
    assert (path / "again.txt").read_text() == "again\n"
    assert git(path, "log", "--format=%s", "-1") == "write again.txt"
    assert "remembered: blue" in json.dumps(chorus.server.turn_requests()[-1].body)


def test_a_queued_job_whose_worktree_was_deleted_refuses_to_start(chorus: Chorus) -> None:
    make_repo(chorus.work)
    config = chorus.home / "config.toml"
    config.write_text(config.read_text().replace("[daemon]\n", "[daemon]\nmax_parallel_jobs = 1\n"))
    chorus.server.script([slow_text("holding the only slot " * 10, chunks=200, delay=0.25)])
    blocker = chorus.run("task", "hold the slot", "--body", "claude").stdout.strip()
    until(lambda: chorus.client.job(blocker)["state"] == "running")
    queued = chorus.run("task", "never runs", "--body", "claude", "--worktree")
    assert queued.returncode == 0, queued.stderr
    job_id = queued.stdout.strip()
    assert chorus.client.job(job_id)["state"] == "queued"
    path = Path(_worktrees(chorus)[job_id]["path"])
    shutil.rmtree(path)
    assert chorus.client.job(job_id)["state"] == "queued"
    assert chorus.run("interrupt", blocker).returncode == 0  # free the slot now

    watched = chorus.run("watch", job_id)
    assert watched.returncode == 1
    job = chorus.client.job(job_id)
    assert job["state"] == "failed"
    assert f"the worktree {path} is gone" in job["error"]["message"]
    events = _events(chorus, job_id)
    assert [e.action for e in events if isinstance(e, Worktree)] == ["refused"]
    ended = events[-1]
    assert isinstance(ended, JobEnded)
    assert ended.error is not None
    assert "will not run there or anywhere else" in ended.error.message
    assert _worktrees(chorus)[job_id]["state"] == "missing"
    assert not (chorus.work / "never").exists()
    assert git(chorus.work, "log", "--format=%s") == "first"  # nothing fell through to main


def test_bad_worktree_input_exits_2_and_makes_nothing(chorus: Chorus) -> None:
    refused = chorus.run("task", "x", "--body", "claude", "--worktree")
    assert refused.returncode == 2
    assert "not inside a git repository" in refused.stderr
    make_repo(chorus.work)
    taken = chorus.run("task", "x", "--body", "claude", "--worktree", "--branch", "main")
    assert taken.returncode == 2
    assert "branch 'main' already exists" in taken.stderr
    git(chorus.work, "checkout", "-q", "--detach")
    detached = chorus.run("task", "x", "--body", "claude", "--worktree")
    assert detached.returncode == 2
    assert "detached" in detached.stderr
    assert chorus.client.jobs() == []
    assert chorus.client.sessions() == []
    assert _worktrees(chorus) == {}
    assert not (chorus.home / "worktrees").exists()


def test_orphans_are_reported_at_daemon_start_and_rm_force_lists_what_it_discards(
    chorus: Chorus,
) -> None:
    make_repo(chorus.work)
    chorus.server.script([shell("echo kept > kept.txt"), text("done")])
    ran = chorus.run("ask", "keep this", "--body", "claude", "--worktree", "--json")
    assert ran.returncode == 0, ran.stderr
    job_id = json.loads(ran.stdout.splitlines()[-1])["job_id"]
    row = _worktrees(chorus)[job_id]
    assert chorus.run("stop").returncode == 0
    shutil.rmtree(row["path"])

    assert chorus.run("start").returncode == 0  # returns once it serves
    said = f"orphaned worktree: job {job_id}: folder {row['path']} is gone"
    until(lambda: said in (chorus.home / "run" / "daemon.log").read_text(), timeout=30)
    after = _worktrees(chorus)[job_id]
    assert (after["state"], after["exists"]) == ("missing", False)
    assert git(chorus.work, "log", "--format=%s", "-1", row["branch"]) == "keep this"

    forced = chorus.run("worktree", "rm", job_id, "--force")
    assert forced.returncode == 0, forced.stderr
    assert "discarding 1 unmerged commit(s):" in forced.stderr
    assert "keep this" in forced.stderr
    assert git(chorus.work, "branch", "--list", row["branch"]) == ""
    assert _worktrees(chorus)[job_id]["state"] == "removed"


ASK = [sys.executable, "-m", "chorus", "ask"]


def test_failover_continues_in_the_same_worktree(chorus_home: Path, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    make_repo(work)
    with ModelServer() as server:
        lines = ["[daemon]", "notifications = false", "[router]", 'bodies = ["claude", "codex"]']
        lines += ["notify_on_failover = false", "rate_limit_delay_s = 0.2"]
        for cli in ("claude", "codex"):
            env = offline_env(cli, tmp_path / f"{cli}-home", server.lane_url(cli))
            lines.append(f"[agents.{cli}.env]")
            lines += [f"{k} = {json.dumps(v)}" for k, v in env.items()]
        chorus_home.mkdir(parents=True, exist_ok=True)
        (chorus_home / "config.toml").write_text("\n".join(lines) + "\n")
        server.script([shell("echo one > one.txt"), error("quota", times=None)], lane="claude")
        server.script([shell("echo two > two.txt"), text("finished the rest")], lane="codex")
        try:
            ran = subprocess.run(
                [*ASK, "Write one.txt then two.txt", "--body", "claude", "--worktree", "--json"],
                capture_output=True,
                text=True,
                timeout=180,
                cwd=work,
                env=os.environ.copy(),
            )
            assert ran.returncode == 0, ran.stderr
            events = [parse_event(line) for line in ran.stdout.splitlines()]
            first_codex = server.turn_requests(lane="codex")[0].last_user_text() or ""
        finally:
            stop_daemon()
    assert server.errors == []
    assert any(isinstance(e, Handoff) and e.to_body == "codex" for e in events)
    created = next(e for e in events if isinstance(e, Worktree))
    tree = Path(created.path)
    assert f"The git worktree {tree} on branch {created.branch}" in first_codex
    assert (tree / "one.txt").read_text() == "one\n"
    assert (tree / "two.txt").read_text() == "two\n"  # codex worked in the same worktree
    assert not (work / "one.txt").exists()
    assert not (work / "two.txt").exists()
    assert git(tree, "show", "--name-only", "--format=%s", "HEAD").split("\n") == [
        "Write one.txt then two.txt",
        "",
        "one.txt",
        "two.txt",
    ]


def test_the_agents_own_commit_lands_on_the_jobs_branch(shared_chorus: Chorus) -> None:
    chorus = shared_chorus
    make_repo(chorus.work)
    commit = "echo mine > mine.txt && git add mine.txt && git commit -qm 'agent commit'"
    chorus.server.script([shell(commit), text("committed")])
    ran = chorus.run("ask", "commit it yourself", "--body", "claude", "--worktree", "--json")
    assert ran.returncode == 0, ran.stderr
    events = [parse_event(line) for line in ran.stdout.splitlines()]
    tree = Path(next(e for e in events if isinstance(e, Worktree)).path)
    assert git(tree, "log", "--format=%s", "-2").split("\n") == ["agent commit", "first"]
    assert not any(isinstance(e, Worktree) and e.action == "committed" for e in events)
    assert git(chorus.work, "log", "--format=%s", "main") == "first"
