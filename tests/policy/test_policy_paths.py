"""Paths as the kernel sees them: `..`, symlinks, case tricks, placeholders."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from chorus.policy import SENSITIVE_PATHS, PathContext, PathVerdict, check_path, resolve_path


@pytest.fixture
def ctx(tmp_path: Path) -> PathContext:
    work = tmp_path / "work"
    work.mkdir()
    return PathContext(
        cwd=work, home=tmp_path / "home", tmp=tmp_path / "tmp", chorus_home=tmp_path / "chorus-home"
    )


def check(
    raw: str, ctx: PathContext, *, write: bool = True, denied: list[str] | None = None
) -> PathVerdict:
    return check_path(
        raw,
        ctx,
        allowed=["{cwd}"],
        read_only=["/usr"],
        denied=list(SENSITIVE_PATHS) if denied is None else denied,
        write=write,
    )


def test_relative_path_inside_the_root_is_allowed(ctx: PathContext) -> None:
    verdict = check("src/main.py", ctx)
    assert verdict.ok
    assert verdict.path is not None
    assert verdict.path.real == (ctx.cwd / "src/main.py").resolve()


@pytest.mark.parametrize("raw", ["../outside.txt", "src/../../outside.txt", "./a/./../../x"])
def test_dotdot_escape_is_denied(ctx: PathContext, raw: str) -> None:
    verdict = check(raw, ctx)
    assert not verdict.ok
    assert verdict.rule == "filesystem.outside_roots"
    assert "outside the writable roots" in verdict.reason


def test_dotdot_that_stays_inside_is_allowed(ctx: PathContext) -> None:
    assert check("a/b/../c.txt", ctx).ok


def test_symlink_escape_of_a_folder_is_denied(ctx: PathContext, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (ctx.cwd / "link").symlink_to(outside)
    verdict = check("link/new.txt", ctx)
    assert not verdict.ok
    assert verdict.path is not None
    assert verdict.path.via_symlink
    assert f"a symlink to {outside}" in verdict.reason


def test_symlink_escape_of_a_file_is_denied(ctx: PathContext, tmp_path: Path) -> None:
    target = tmp_path / "secret.txt"
    target.write_text("x")
    (ctx.cwd / "innocent.txt").symlink_to(target)
    assert not check("innocent.txt", ctx).ok
    assert not check(str(ctx.cwd / "innocent.txt"), ctx, write=False).ok


def test_symlink_then_dotdot_follows_the_target_like_the_kernel(
    ctx: PathContext, tmp_path: Path
) -> None:
    # link/.. is the parent of the link's target, not the folder holding the link.
    deep = tmp_path / "elsewhere" / "deep"
    deep.mkdir(parents=True)
    (ctx.cwd / "link").symlink_to(deep)
    verdict = check("link/../x.txt", ctx)
    assert not verdict.ok
    assert verdict.path is not None
    assert verdict.path.real == tmp_path / "elsewhere" / "x.txt"


def test_symlink_pointing_into_the_root_is_allowed(ctx: PathContext, tmp_path: Path) -> None:
    (ctx.cwd / "real").mkdir()
    alias = tmp_path / "alias"
    alias.symlink_to(ctx.cwd / "real")
    assert check(str(alias / "f.txt"), ctx).ok


def test_symlink_to_a_denied_file_is_denied_even_inside_the_root(ctx: PathContext) -> None:
    ssh = ctx.home / ".ssh"
    ssh.mkdir(parents=True)
    (ssh / "id_rsa").write_text("key")
    (ctx.cwd / "notes.txt").symlink_to(ssh / "id_rsa")
    verdict = check("notes.txt", ctx, write=False)
    assert verdict.rule == "filesystem.denied_path"


@pytest.mark.parametrize("raw", ["~/.SSH/id_rsa", "~/.Ssh/config", "~/.AWS/credentials", ".ENV"])
def test_case_tricks_do_not_dodge_denied_paths(ctx: PathContext, raw: str) -> None:
    verdict = check(raw, ctx, write=False)
    assert not verdict.ok
    assert verdict.rule == "filesystem.denied_path"


def test_dotenv_variants_and_keys_are_denied(ctx: PathContext) -> None:
    for raw in (".env", "sub/.env", ".env.production", "deploy/server.pem", "keys/id_ed25519"):
        assert check(raw, ctx, write=False).rule == "filesystem.denied_path", raw


def test_chorus_home_is_denied_so_a_body_cannot_edit_its_own_policy(ctx: PathContext) -> None:
    verdict = check(str(ctx.chorus_home / "policy.toml"), ctx)
    assert verdict.rule == "filesystem.denied_path"


def test_read_only_roots_allow_reads_but_not_writes(ctx: PathContext) -> None:
    assert check("/usr/share/dict/words", ctx, write=False).ok
    assert not check("/usr/share/dict/words", ctx, write=True).ok


def test_nul_byte_and_empty_paths_are_refused(ctx: PathContext) -> None:
    assert check("a\x00b", ctx).rule == "filesystem.bad_path"
    assert check("", ctx).rule == "filesystem.bad_path"


def test_placeholders_expand(ctx: PathContext) -> None:
    assert ctx.expand("{cwd}/x") == f"{ctx.cwd}/x"
    assert ctx.expand("~/y") == f"{ctx.home}/y"
    assert ctx.expand("{chorus_home}") == str(ctx.chorus_home)


def test_resolve_keeps_both_forms(ctx: PathContext) -> None:
    resolved = resolve_path("a/../b", ctx)
    assert resolved.lexical == ctx.cwd / "b"
    assert resolved.real == Path(os.path.realpath(ctx.cwd / "b"))
    assert not resolved.via_symlink


def test_a_job_worktree_under_chorus_home_is_the_users_code(ctx: PathContext) -> None:
    # jobs run in CHORUS_HOME/worktrees/<repo>/<job>; that is their cwd.
    tree = ctx.chorus_home / "worktrees" / "repo-1234" / "job1"
    tree.mkdir(parents=True)
    in_tree = PathContext(cwd=tree, home=ctx.home, tmp=ctx.tmp, chorus_home=ctx.chorus_home)
    assert check("notes.txt", in_tree).ok
    assert check(str(tree / "sub" / "a.py"), in_tree).ok
    # The rest of CHORUS_HOME stays denied, even from inside a worktree ...
    for raw in ("../../../policy.toml", str(ctx.chorus_home / "chorus.db")):
        verdict = check(raw, in_tree)
        assert verdict.rule == "filesystem.denied_path", raw
    # ... and other denials still apply inside it.
    assert check(".env", in_tree).rule == "filesystem.denied_path"


def test_the_same_pattern_follows_each_context_it_is_checked_in(tmp_path: Path) -> None:
    """Patterns are expanded once per (pattern, context) and kept: a second context
    (another session's folder) must get its own expansion, never the first one's."""
    one, two = tmp_path / "one", tmp_path / "two"
    for work in (one, two):
        (work / "secrets").mkdir(parents=True)
    home = tmp_path / "home"

    def in_ctx(work: Path) -> PathContext:
        return PathContext(cwd=work, home=home, tmp=tmp_path / "tmp", chorus_home=tmp_path / "ch")

    for work in (one, two, one):
        own = check("secrets/key.txt", in_ctx(work), denied=["{cwd}/secrets"])
        other = check(str(two if work == one else one) + "/secrets/key.txt", in_ctx(work))
        assert (own.ok, own.rule) == (False, "filesystem.denied_path")
        assert (other.ok, other.rule) == (False, "filesystem.outside_roots")
