"""The launcher starts long-lived bodies with their CLI's own rules."""

from __future__ import annotations

from pathlib import Path

import pytest

from chorus.bodies import allow_all
from chorus.config import ChorusConfig
from chorus.policy import Policy
from chorus.sandbox import tool_path
from chorus.session import Launch
from chorus.session._launcher import BodyLauncher, PolicyGuards
from chorus.store import SqliteStore
from tests._repo import git, make_repo

CONFIG = ChorusConfig.model_validate({"sandbox": {"mode": "off"}})


@pytest.fixture
def store(tmp_path: Path, chorus_home: Path) -> SqliteStore:
    return SqliteStore(tmp_path / "chorus.db")


def launch(body: str) -> Launch:
    return Launch(body=body, model=None, resume=None, gate=None, mode=None, permission=allow_all)


def test_long_lived_bodies_get_their_rules_one_shot_bodies_do_not(
    store: SqliteStore, tmp_path: Path
) -> None:
    policy = Policy.model_validate({"filesystem": {"allowed_paths": ["{cwd}", "/srv/x"]}})
    launcher = BodyLauncher(CONFIG, store, guards=PolicyGuards(policy))
    claude = launcher.options_for(str(tmp_path), launch("claude"), lambda *a: None)
    assert claude.extra_args[0] == "--settings"
    assert "Read(**/.env)" in claude.extra_args[1]
    gemini = launcher.options_for(str(tmp_path), launch("gemini"), lambda *a: None)
    assert gemini.extra_args[-2] == "--admin-policy"
    assert Path(gemini.extra_args[-1]).is_file()
    codex = launcher.options_for(str(tmp_path), launch("codex"), lambda *a: None)
    assert codex.extra["allowed_roots"] == ("/srv/x",)
    assert "-c" in codex.extra_args
    one_shot = launcher.options_for(str(tmp_path), launch("claude-print"), lambda *a: None)
    assert "--disallowedTools" not in one_shot.extra_args


def test_without_a_policy_nothing_is_added(store: SqliteStore, tmp_path: Path) -> None:
    launcher = BodyLauncher(CONFIG, store)
    options = launcher.options_for(str(tmp_path), launch("claude"), lambda *a: None)
    assert "--settings" not in options.extra_args


def test_a_one_shot_body_sees_the_policy_from_the_sessions_folder(
    store: SqliteStore, tmp_path: Path
) -> None:
    """``{cwd}`` in a denied path is the session's folder, not the daemon's."""
    work = tmp_path / "job-folder"
    work.mkdir()
    policy = Policy.model_validate({"filesystem": {"denied_paths": ["{cwd}/private"]}})
    guards = PolicyGuards(policy)
    launcher = BodyLauncher(CONFIG, store, guards=guards)
    gate = guards.gate(session_id="s1", cwd=str(work), mode="default")
    job = Launch(
        body="claude-print", model=None, resume=None, gate=gate, mode=None, permission=allow_all
    )
    options = launcher.options_for(str(work), job, lambda *a: None)
    rules = options.permission_args or []
    assert f"Read(/{work}/private)" in rules  # Claude's absolute paths start with //
    assert f"Edit(/{work}/private/**)" in rules
    assert not [r for r in rules if str(Path.cwd() / "private") in r]


@pytest.mark.skipif(tool_path() is None, reason="no sandbox tool")
def test_in_a_worktree_codex_may_write_what_a_commit_writes_of_the_repository(
    store: SqliteStore, tmp_path: Path
) -> None:
    """Under the OS sandbox, Codex's own workspace sandbox lets a worktree's commit
    write the main repository's objects, refs, logs and the worktree's folder (else the
    commit waits on Codex retrying it outside once it spots the denial, which it may
    miss on a loaded machine); never the repository's config or hooks."""
    repo, tree = tmp_path / "repo", tmp_path / "tree"
    repo.mkdir()
    make_repo(repo)
    git(repo, "worktree", "add", "-q", str(tree))
    common = (repo / ".git").resolve()
    boxed = ChorusConfig.model_validate({"sandbox": {"mode": "auto"}})
    for config, wanted in ((boxed, True), (CONFIG, False)):
        launcher = BodyLauncher(config, store, guards=PolicyGuards(Policy()))
        codex = launcher.options_for(str(tree), launch("codex"), lambda *a: None)
        roots = [Path(r) for r in codex.extra.get("allowed_roots", ())]
        assert ({common / "objects", common / "refs", common / "logs"} <= set(roots)) is wanted
        assert any(r.parent == common / "worktrees" for r in roots) is wanted
        assert not any((common / "config").is_relative_to(r) for r in roots)
        assert not any((common / "hooks").is_relative_to(r) for r in roots)


@pytest.mark.skipif(tool_path() is None, reason="no sandbox tool")
def test_the_sandbox_keeps_what_the_clients_mcp_servers_run_from(
    store: SqliteStore, tmp_path: Path
) -> None:
    """A client's stdio MCP server under /tmp: its script's folder is bound back into
    the body's private /tmp (the CLI starts it inside the sandbox)."""
    from chorus.bodies import McpServer
    from chorus.context import Brief

    script = tmp_path / "servers" / "probe.py"
    script.parent.mkdir()
    script.write_text("")
    server = McpServer(command="/usr/bin/python3", args=(str(script),))
    config = ChorusConfig.model_validate({"sandbox": {"mode": "auto"}})
    launcher = BodyLauncher(config, store)
    job = Launch(
        body="claude",
        model=None,
        resume=None,
        gate=None,
        mode=None,
        permission=allow_all,
        brief=Brief(mcp_servers={"probe": server}),
    )
    work = tmp_path / "work"
    work.mkdir()
    options = launcher.options_for(str(work), job, lambda *a: None)
    assert options.executable is not None
    wrapper = options.executable.read_text()
    assert f"'--ro-bind' '{script.parent.resolve()}'" in wrapper


@pytest.mark.skipif(tool_path() is None, reason="no sandbox tool")
def test_the_sandbox_keeps_the_script_an_acp_agent_of_the_config_runs(
    store: SqliteStore, tmp_path: Path
) -> None:
    """``[agents.NAME]`` with ``command = python`` and a script under /tmp as its
    argument: the script's folder is bound back, not only the interpreter."""
    script = tmp_path / "agents" / "agent.py"
    script.parent.mkdir()
    script.write_text("")
    agent = {"command": "/usr/bin/python3", "args": [str(script)], "protocol": "acp"}
    config = ChorusConfig.model_validate({"sandbox": {"mode": "auto"}, "agents": {"mine": agent}})
    work = tmp_path / "work"
    work.mkdir()
    options = BodyLauncher(config, store).options_for(str(work), launch("mine"), lambda *a: None)
    assert options.executable is not None
    assert f"'--ro-bind' '{script.parent.resolve()}'" in options.executable.read_text()
