"""Native flags for one-shot bodies, all from native_flags.toml; dangerous ones only if allowed."""

from __future__ import annotations

from pathlib import Path

import pytest

from chorus._errors import ConfigError, UnknownBodyError
from chorus.policy import PathContext, Policy, dangerous_flags, load_native_table, native_flags
from chorus.policy._native_flags import parse_native_table

BODIES = ("claude-print", "codex-exec", "gemini-headless")


@pytest.fixture
def ctx(tmp_path: Path) -> PathContext:
    return PathContext(tmp_path / "w", tmp_path / "h", tmp_path / "t", tmp_path / "c")


def bare(**sections: object) -> Policy:
    """A policy with no denied paths or commands, so only the mode flags show."""
    base: dict[str, object] = {"filesystem": {"denied_paths": []}, "shell": {"denied_commands": []}}
    return Policy.model_validate({**base, **sections})


@pytest.mark.parametrize(
    ("body", "mode", "args"),
    [
        ("claude-print", "default", ("--permission-mode", "default")),
        ("claude-print", "plan", ("--permission-mode", "plan")),
        ("codex-exec", "acceptEdits", ("-c", 'sandbox_mode="workspace-write"')),
        ("codex-exec", "plan", ("-c", 'sandbox_mode="read-only"')),
        ("gemini-headless", "acceptEdits", ("--approval-mode", "auto_edit")),
        ("gemini-headless", "default", ("--approval-mode", "default")),
    ],
)
def test_each_mode_maps_to_the_cli_s_own_enforcement(
    body: str, mode: str, args: tuple[str, ...], ctx: PathContext
) -> None:
    flags = native_flags(body, bare(), mode=mode, ctx=ctx)  # type: ignore[arg-type]
    assert flags.args[: len(args)] == args
    # Only Gemini's policy file follows (its plan rule is there even in a bare policy).
    assert flags.args[len(args) :] == (
        ("--admin-policy", flags.args[-1]) if body == "gemini-headless" else ()
    )
    assert flags.dangerous == ()
    assert flags.env == {}


@pytest.mark.parametrize("body", BODIES)
def test_bypass_falls_back_unless_the_policy_allows_dangerous_flags(
    body: str, ctx: PathContext
) -> None:
    refused = native_flags(body, bare(), mode="bypassPermissions", ctx=ctx)
    assert refused.mode == "acceptEdits"
    assert refused.dangerous == ()
    assert "allow_dangerous is false" in refused.notes[0]
    allowed = native_flags(
        body, bare(native={"allow_dangerous": True}), mode="bypassPermissions", ctx=ctx
    )
    assert allowed.mode == "bypassPermissions"
    assert allowed.dangerous == allowed.args[:1]
    assert "skips its own checks" in allowed.notes[0]


def test_claude_needs_is_sandbox_with_its_dangerous_flag(ctx: PathContext) -> None:
    flags = native_flags(
        "claude-print", bare(native={"allow_dangerous": True}), mode="bypassPermissions", ctx=ctx
    )
    assert flags.args == ("--dangerously-skip-permissions",)
    assert flags.env == {"IS_SANDBOX": "1"}


def test_claude_gets_the_policy_deny_rules(ctx: PathContext) -> None:
    flags = native_flags("claude-print", Policy(), mode="default", ctx=ctx)
    args = list(flags.args)
    rules = args[args.index("--disallowedTools") + 1 :]
    assert "Bash(sudo:*)" in rules
    assert "Bash(git push --force:*)" in rules
    assert "Read(~/.ssh/**)" in rules
    assert "Edit(**/.env)" in rules
    assert f"Read(/{ctx.chorus_home}/**)" in rules  # "//abs" is Claude's absolute form


def test_codex_gets_extra_writable_roots(ctx: PathContext) -> None:
    policy = bare(filesystem={"allowed_paths": ["{cwd}", "/srv/shared"], "denied_paths": []})
    flags = native_flags("codex-exec", policy, mode="default", ctx=ctx)
    assert flags.args[-2:] == ("-c", 'sandbox_workspace_write.writable_roots=["/srv/shared"]')


def test_unknown_bodies_are_refused(ctx: PathContext) -> None:
    with pytest.raises(UnknownBodyError):
        native_flags("claude", Policy(), ctx=ctx)  # has a callback: no native flags


def test_the_data_file_lists_every_dangerous_flag_it_uses() -> None:
    table = load_native_table()
    assert set(table.bodies) == set(BODIES)
    for body, entry in table.bodies.items():
        assert set(entry.bypass) <= table.dangerous_for(body)
        assert table.allowed_dangerous(body), body
    assert {d.flag for d in dangerous_flags("gemini-headless")} == {"--yolo", "yolo"}


def test_a_dangerous_flag_outside_bypass_is_rejected() -> None:
    text = """
[bodies.x]
default = ["--yolo"]
acceptEdits = []
plan = []
bypassPermissions = ["--yolo"]

[[dangerous]]
body = "x"
flag = "--yolo"
allowed = true
why = "test"
"""
    with pytest.raises(ConfigError, match="dangerous"):
        parse_native_table(text)


def test_a_dangerous_flag_the_file_does_not_allow_is_never_emitted(ctx: PathContext) -> None:
    text = """
[bodies.x]
default = []
acceptEdits = ["--auto-edit"]
plan = []
bypassPermissions = ["--yolo"]

[[dangerous]]
body = "x"
flag = "--yolo"
allowed = false
why = "test"
"""
    table = parse_native_table(text)
    flags = native_flags(
        "x", bare(native={"allow_dangerous": True}), mode="bypassPermissions", ctx=ctx, table=table
    )
    assert (flags.mode, flags.args) == ("acceptEdits", ("--auto-edit",))
    assert "not allowed by native_flags.toml" in flags.notes[0]
