"""Gemini's policy file from policy.toml: rules, patterns, and the real CLI
loading every rule of it."""

from __future__ import annotations

import json
import re
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest

from chorus.agents import find_agent
from chorus.policy import PathContext, Policy
from chorus.policy._gemini_policy import (
    ANY_ARGS,
    OFFER_PRIORITY,
    PRIORITY,
    admin_tier_free,
    gemini_policy_toml,
    glob_regex,
    policy_dir,
    write_policy_file,
)
from chorus.testing import GEMINI_MODEL, ModelServer, Scenario, offline_env, text

#: Gemini's own check (isSafeRegExp): a quantified group after a quantifier is refused.
GEMINI_UNSAFE = re.compile(r"\([^)]*[*+?{].*\)[*+?{]")


@pytest.fixture
def ctx(tmp_path: Path) -> PathContext:
    return PathContext(tmp_path / "w", Path("/home/u"), tmp_path / "t", tmp_path / "c")


def args(**values: str) -> str:
    """A tool call's arguments as Gemini's stableStringify gives them to a pattern."""
    return "{" + ",".join(f"\0{json.dumps(k)}:{json.dumps(v)}\0" for k, v in values.items()) + "}"


def rules(
    ctx: PathContext, policy: Policy | None = None, *, asks: bool = False
) -> list[dict[str, Any]]:
    parsed = tomllib.loads(gemini_policy_toml(policy or Policy(), ctx, asks=asks))
    return list(parsed["rule"])


def denied(ctx: PathContext, call: str) -> list[str]:
    """The path rules (any mode) that refuse ``call``."""
    return [
        str(r["denyMessage"])
        for r in rules(ctx)
        if "argsPattern" in r and "modes" not in r and re.search(str(r["argsPattern"]), call)
    ]


@pytest.mark.parametrize(
    "call",
    [
        args(file_path=".env"),
        args(file_path="/srv/app/.env"),
        args(command="cat .env"),
        args(command="cd sub && cat ./config/.env.local"),
        args(file_path="/home/u/.ssh/id_ed25519"),
        args(command="cat ~/.ssh/config"),
        args(command="tar czf /tmp/x.tgz /home/u/.aws"),
        args(file_path="certs/server.pem"),
        args(command="cat /etc/shadow"),
    ],
)
def test_a_call_naming_a_denied_path_is_denied(ctx: PathContext, call: str) -> None:
    assert denied(ctx, call), call


@pytest.mark.parametrize(
    "call",
    [
        args(file_path="src/environment.py"),
        args(command="cat README.md"),
        args(file_path="/home/u/.sshd_notes"),
        args(command="grep -r env ."),
        args(file_path="docs/pem.txt"),
    ],
)
def test_an_ordinary_call_is_not(ctx: PathContext, call: str) -> None:
    assert denied(ctx, call) == [], call


def test_denied_commands_and_plan_writes(ctx: PathContext) -> None:
    """Each refusal says the policy's rule and reason in the one wording."""
    shells = [r for r in rules(ctx) if "commandPrefix" in r]
    assert {"sudo", "su", "git push --force"} <= {r["commandPrefix"][0] for r in shells}
    sudo = next(r for r in shells if r["commandPrefix"] == ["sudo"])
    assert sudo["denyMessage"].startswith(
        "[Chorus policy] denied this shell call [shell.denied_command]: `sudo` is a denied command"
    )
    path = denied(ctx, args(file_path=".env"))[0]
    assert path.startswith("[Chorus policy] denied this call [filesystem.denied_path]: ")
    assert "'**/.env'" in path
    plan = next(r for r in rules(ctx) if r["toolName"] == ["write_file", "replace"])
    assert plan == {
        "toolName": ["write_file", "replace"],
        "modes": ["plan"],
        "argsPattern": ANY_ARGS,
        "decision": "deny",
        "priority": PRIORITY,
        "denyMessage": "[Chorus policy] denied this write call [mode.plan]: plan mode is "
        "read-only: write calls are not allowed. Do not retry it or work around it; "
        "choose another approach or ask the user.",
    }
    quiet = Policy.model_validate(
        {"shell": {"mode": "unrestricted"}, "filesystem": {"denied_paths": []}}
    )
    names = [r["toolName"] for r in rules(ctx, quiet)]
    assert names == [["write_file", "replace"], "run_shell_command", "run_shell_command"]


def test_a_one_shot_gemini_has_a_shell_except_in_plan_mode(ctx: PathContext) -> None:
    """Headless Gemini drops the tools it would have to ask about: the file offers the
    shell below every refusal, and refuses it in plan mode with the reason."""
    *_, plan, offer = rules(ctx)
    assert offer == {"toolName": "run_shell_command", "decision": "allow",
                     "priority": OFFER_PRIORITY, "allowRedirection": True}  # fmt: skip
    assert OFFER_PRIORITY < PRIORITY
    assert (plan["modes"], plan["decision"], plan["argsPattern"]) == (["plan"], "deny", ANY_ARGS)
    assert "[mode.plan]" in plan["denyMessage"]


def test_with_a_callback_commands_are_asked_about(ctx: PathContext) -> None:
    """With a callback, denied commands and plan-mode commands reach Chorus."""
    shells = [r for r in rules(ctx, asks=True) if r["toolName"] == "run_shell_command"]
    assert {r["decision"] for r in shells} == {"ask_user"}
    assert [r["modes"] for r in shells if "commandPrefix" not in r] == [["plan"]]


def test_every_pattern_passes_gemini_s_redos_check(ctx: PathContext) -> None:
    patterns = [str(r["argsPattern"]) for r in rules(ctx) if "argsPattern" in r]
    assert len(patterns) >= 20
    assert [p for p in patterns if GEMINI_UNSAFE.search(p)] == []
    assert not GEMINI_UNSAFE.search(glob_regex("/a/**/b/*.key"))


def test_the_file_is_private_and_rewritten(tmp_path: Path) -> None:
    folder = policy_dir()
    assert folder.stat().st_mode & 0o777 == 0o700
    path = write_policy_file("one\n", folder=tmp_path)
    path.write_text("tampered\n")
    assert write_policy_file("one\n", folder=tmp_path) == path
    assert path.read_text() == "one\n"
    assert path.stat().st_mode & 0o777 == 0o600


@pytest.mark.e2e
def test_the_real_gemini_loads_every_rule(tmp_path: Path) -> None:
    """The pinned CLI reports any rule it refuses ("Policy file error") on stderr."""
    work = tmp_path / "work"
    work.mkdir()
    ctx = PathContext.current(work)
    path = write_policy_file(gemini_policy_toml(Policy(), ctx), folder=tmp_path)
    with ModelServer(Scenario.of(text("hello"))) as server:
        env = offline_env("gemini", tmp_path / "home", server.url)
        argv = [str(find_agent("gemini")), "-p", "hi", "-m", GEMINI_MODEL]
        argv += ["--admin-policy", str(path)]
        done = subprocess.run(
            argv, cwd=work, env=env, capture_output=True, text=True, timeout=60, check=False
        )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "hello" in done.stdout
    assert "Policy file error" not in done.stderr, done.stderr[-2000:]


def test_system_policies_push_the_file_to_the_user_tier(tmp_path: Path) -> None:
    assert admin_tier_free(tmp_path / "absent")
    system = tmp_path / "policies"
    system.mkdir()
    (system / "README").write_text("")
    assert admin_tier_free(system)
    (system / "org.toml").write_text("")
    assert not admin_tier_free(system)
