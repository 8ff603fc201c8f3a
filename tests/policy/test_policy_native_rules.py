"""Native rules for long-lived bodies: each CLI's own refusals from policy.toml."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from chorus._errors import ConfigError
from chorus.policy import NativeRules, PathContext, Policy, native_flags, native_rules
from chorus.policy._native_flags import parse_native_table


@pytest.fixture
def ctx(tmp_path: Path) -> PathContext:
    return PathContext(tmp_path / "w", tmp_path / "h", tmp_path / "t", tmp_path / "c")


def policy(**sections: object) -> Policy:
    return Policy.model_validate(sections)


def after(args: tuple[str, ...], flag: str) -> list[str]:
    return list(args[args.index(flag) + 1 :])


def asked(args: tuple[str, ...]) -> list[str]:
    """The ask rules of Claude's ``--settings`` JSON."""
    assert args[0] == "--settings"
    settings = json.loads(args[1])
    assert list(settings) == ["permissions"]
    return list(settings["permissions"]["ask"])


def test_claude_asks_where_claude_print_refuses_and_gets_no_mode_flags(
    ctx: PathContext,
) -> None:
    """The same path templates as claude-print, as ask rules, and every shell command:
    Claude asks Chorus, which refuses with its rule and reason (and audits)."""
    rules = native_rules("claude", Policy(), ctx=ctx)
    one_shot = native_flags("claude-print", Policy(), mode="default", ctx=ctx)
    assert len(rules.args) == 2
    assert "--permission-mode" not in rules.args
    ask = asked(rules.args)
    paths = [r for r in after(one_shot.args, "--disallowedTools") if not r.startswith("Bash(")]
    assert ask == ["Bash", *paths]
    assert {"Read(**/.env)", "Edit(**/.env)", "Read(~/.ssh/**)"} <= set(ask)
    assert "Bash(sudo:*)" in one_shot.args
    assert rules.roots == ()


def test_claude_follows_the_policy_s_own_lists(ctx: PathContext) -> None:
    mine = policy(
        filesystem={"denied_paths": ["secrets/*.key"]},
        shell={"denied_commands": ["terraform destroy"]},
    )
    ask = asked(native_rules("claude", mine, ctx=ctx).args)
    assert ask == ["Bash", "Read(secrets/*.key)", "Edit(secrets/*.key)"]
    one_shot = native_flags("claude-print", mine, mode="default", ctx=ctx).args
    assert "Bash(terraform destroy:*)" in one_shot
    nothing = policy(filesystem={"denied_paths": []})
    assert asked(native_rules("claude", nothing, ctx=ctx).args) == ["Bash"]


def test_a_job_inside_chorus_home_keeps_its_worktree_readable(tmp_path: Path) -> None:
    """Denying all of CHORUS_HOME would deny a worktree job its own folder: the rule
    names the home's other entries instead (the work folders stay readable)."""
    home = tmp_path / "c"
    (home / "worktrees" / "job1").mkdir(parents=True)
    (home / "audit").mkdir()
    (home / "policy.toml").write_text("")
    inside = PathContext(home / "worktrees" / "job1", tmp_path / "h", tmp_path / "t", home)
    mine = policy(filesystem={"denied_paths": ["{chorus_home}"]}, shell={"denied_commands": []})
    deny = asked(native_rules("claude", mine, ctx=inside).args)
    assert f"Read(/{home}/audit/**)" in deny
    assert f"Edit(/{home}/policy.toml)" in deny
    assert not any("worktrees" in rule for rule in deny)
    assert f"Read(/{home}/**)" not in deny
    outside = PathContext(tmp_path / "w", tmp_path / "h", tmp_path / "t", home)
    whole = asked(native_rules("claude", mine, ctx=outside).args)
    assert f"Read(/{home}/**)" in whole


def test_gemini_gets_an_admin_policy_file_written_from_the_policy(ctx: PathContext) -> None:
    rules = native_rules("gemini", Policy(), ctx=ctx)
    assert rules.args[0] == "--admin-policy"
    assert len(rules.args) == 2
    path = Path(rules.args[1])
    assert path.stat().st_mode & 0o077 == 0
    parsed = tomllib.loads(path.read_text())
    assert parsed["rule"][0]["commandPrefix"][0] == "sudo"
    assert any(r.get("modes") == ["plan"] for r in parsed["rule"])


def test_codex_gets_the_extra_roots_writable(ctx: PathContext) -> None:
    mine = policy(filesystem={"allowed_paths": ["{cwd}", "/srv/shared"]})
    rules = native_rules("codex", mine, ctx=ctx)
    assert rules.args == ("-c", 'sandbox_workspace_write.writable_roots=["/srv/shared"]')
    assert rules.roots == ("/srv/shared",)
    assert native_rules("codex", Policy(), ctx=ctx) == NativeRules("codex")


def test_bodies_without_an_entry_get_nothing(ctx: PathContext) -> None:
    for body in ("claude-print", "codex-acp", "claude-code-acp", "nope"):
        assert native_rules(body, Policy(), ctx=ctx) == NativeRules(body)


def test_long_lived_must_name_a_listed_one_shot_body() -> None:
    text = """
dangerous = []
[bodies.x]
default = []
acceptEdits = []
plan = []
bypassPermissions = []
[long_lived]
y = "{target}"
"""
    assert parse_native_table(text.format(target="x")).long_lived == {"y": "x"}
    with pytest.raises(ConfigError, match="does not list: \\['nowhere'\\]"):
        parse_native_table(text.format(target="nowhere"))


def test_gemini_headless_refuses_commands_gemini_over_acp_asks_about_them(
    ctx: PathContext,
) -> None:
    """One-shot Gemini cannot ask: its file refuses denied commands and denied paths.
    Over ACP they are routed to Chorus instead (its reason, its audit), but for a
    denied path in yolo mode (Gemini would approve an ask there)."""
    one_shot = Path(native_flags("gemini-headless", Policy(), mode="default", ctx=ctx).args[-1])
    acp = Path(native_rules("gemini", Policy(), ctx=ctx).args[-1])
    rules_one_shot = tomllib.loads(one_shot.read_text())["rule"]
    rules_acp = tomllib.loads(acp.read_text())["rule"]

    def commands(rules: list[dict[str, object]]) -> list[dict[str, object]]:
        return [r for r in rules if "commandPrefix" in r]

    def paths(rules: list[dict[str, object]]) -> list[dict[str, object]]:
        return [r for r in rules if r["toolName"] == "*"]

    assert {r["decision"] for r in commands(rules_one_shot)} == {"deny"}
    assert {r["decision"] for r in commands(rules_acp)} == {"ask_user"}
    assert "plan" not in commands(rules_acp)[0]["modes"]  # plan: the catch-all ask
    assert {r["decision"] for r in paths(rules_one_shot)} == {"deny"}
    asks = [r for r in paths(rules_acp) if r["decision"] == "ask_user"]
    denies = [r for r in paths(rules_acp) if r["decision"] == "deny"]
    assert [r["argsPattern"] for r in denies] == [r["argsPattern"] for r in paths(rules_one_shot)]
    assert [r["argsPattern"] for r in asks] == [r["argsPattern"] for r in denies]
    assert {tuple(r["modes"]) for r in asks} == {("default", "autoEdit", "plan")}
    assert all(a["priority"] > d["priority"] for a, d in zip(asks, denies, strict=True))
