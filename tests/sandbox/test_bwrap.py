"""The sandbox's command line and layout, from a policy and what exists on disk."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from chorus._errors import ConfigError
from chorus.policy import Policy
from chorus.policy._gemini_policy import write_policy_file
from chorus.sandbox import Layout, active, argv, bwrap_path, layout, outermost, write_wrapper


def test_mounts_come_in_an_order_where_hiding_wins(tmp_path: Path) -> None:
    box = Layout(
        writable=(tmp_path / "work",),
        hidden_dirs=(tmp_path / "work" / "secrets",),
        hidden_files=(tmp_path / "work" / ".env",),
        chorus_home=tmp_path / "home",
        shared=(tmp_path / "home" / "memory",),
        cwd=tmp_path / "work",
    )
    line = argv("/usr/bin/bwrap", box, ["claude", "-p"])
    assert line[:4] == ["/usr/bin/bwrap", "--ro-bind", "/", "/"]
    order = [line.index(str(p)) for p in (box.writable[0], box.chorus_home, box.shared[0])]
    assert order == sorted(order)  # writable, then CHORUS_HOME hidden, then shared back
    assert line[line.index(str(tmp_path / "work" / ".env")) - 2 :][:2] == ["--ro-bind", "/dev/null"]
    assert line[-3:] == ["--", "claude", "-p"]


def test_outermost_drops_nested_and_repeated_paths() -> None:
    paths = [Path("/a/b"), Path("/a"), Path("/c"), Path("/a/b/c"), Path("/c")]
    assert outermost(paths) == (Path("/a"), Path("/c"))


def test_layout_from_the_default_policy(tmp_path: Path) -> None:
    work, home, chorus_home = tmp_path / "work", tmp_path / "home", tmp_path / "work" / ".ch"
    (work / "sub").mkdir(parents=True)
    (work / "sub" / ".env").write_text("TOKEN=1")
    (work / "key.pem").write_text("x")
    (home / ".ssh").mkdir(parents=True)
    chorus_home.mkdir()
    (chorus_home / "memory").mkdir()
    box = layout(Policy(), work, {"HOME": str(home)}, chorus_home)
    assert work.resolve() in box.writable or any(
        work.resolve().is_relative_to(p) for p in box.writable
    )
    assert (work / "sub" / ".env").resolve() in box.hidden_files
    assert (work / "key.pem").resolve() in box.hidden_files
    assert (home / ".ssh").resolve() in box.hidden_dirs
    assert box.chorus_home == chorus_home.resolve()
    assert (chorus_home / "memory").resolve() in box.shared


def test_a_folder_inside_chorus_home_stays_reachable(tmp_path: Path) -> None:
    chorus_home = tmp_path / "ch"
    work = chorus_home / "workspace"
    work.mkdir(parents=True)
    box = layout(Policy(), work, {"HOME": str(tmp_path)}, chorus_home)
    assert work.resolve() in box.shared  # bound back after CHORUS_HOME is hidden


def test_modes(monkeypatch: pytest.MonkeyPatch) -> None:
    assert active("off") is False
    monkeypatch.setattr("chorus.sandbox._build.bwrap_path", lambda: None)
    assert active("auto") is False
    with pytest.raises(ConfigError, match="needs bubblewrap"):
        active("enforce")
    monkeypatch.setattr("chorus.sandbox._build.bwrap_path", lambda: "/usr/bin/bwrap")
    assert active("auto") is True


@pytest.mark.parametrize(
    ("platform", "says"),
    [("darwin", "needs /usr/bin/sandbox-exec"), ("win32", "only available on Linux")],
)
def test_enforce_elsewhere_refuses_clearly(
    monkeypatch: pytest.MonkeyPatch, platform: str, says: str
) -> None:
    monkeypatch.setattr("chorus.sandbox._build.bwrap_path", lambda: None)
    monkeypatch.setattr("chorus.sandbox._build.sys.platform", platform)
    monkeypatch.setattr("chorus.sandbox._build.os.access", lambda path, how: False)
    with pytest.raises(ConfigError, match=says) as caught:
        active("enforce")
    assert "mode = 'off'" in str(caught.value)


def test_a_git_worktree_can_write_its_main_repository(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other_tmp = tmp_path / "other-tmp"
    other_tmp.mkdir()
    monkeypatch.setattr("tempfile.gettempdir", lambda: str(other_tmp))
    main_git = tmp_path / "repo" / ".git"
    (main_git / "worktrees" / "job1").mkdir(parents=True)
    work = tmp_path / "wt" / "job1"
    work.mkdir(parents=True)
    (work / ".git").write_text(f"gitdir: {main_git / 'worktrees' / 'job1'}\n")
    box = layout(Policy(), work, {"HOME": str(tmp_path / "home")}, tmp_path / "ch")
    assert main_git.resolve() in box.writable


@pytest.mark.skipif(bwrap_path() is None, reason="bubblewrap is not installed")
def test_a_sandboxed_body_cannot_reach_the_audit_log_its_head_or_the_vault_key(
    tmp_path: Path,
) -> None:
    """Issue 14: the audit chain's head and the key that signs it are out of a body's reach."""
    work, chorus_home = tmp_path / "work", tmp_path / "ch"
    work.mkdir()
    files = {
        chorus_home / "audit" / "head.json": '{"seq": 0}',
        chorus_home / "audit" / "audit.jsonl": "{}\n",
        chorus_home / "secrets" / "master.key": "k" * 32,
    }
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    box = layout(Policy(), work, {"HOME": str(tmp_path)}, chorus_home)
    script = "; ".join(f"cat {p}; echo forged > {p}" for p in files)
    bwrap = bwrap_path()
    assert bwrap is not None
    wrapper = write_wrapper(tmp_path / "w.sh", bwrap, box, Path("/bin/sh"))
    done = subprocess.run([str(wrapper), "-c", script], capture_output=True, text=True)
    assert "forged" not in done.stdout
    assert '{"seq": 0}' not in done.stdout
    assert all(path.read_text() == text for path, text in files.items())
    assert done.stderr.count("No such file") + done.stderr.count("denied") >= len(files)


@pytest.mark.skipif(bwrap_path() is None, reason="bubblewrap is not installed")
def test_denied_programs_are_stubs_that_say_why_inside_the_sandbox(tmp_path: Path) -> None:
    """``sudo`` (installed or not) fails inside the sandbox naming the policy, by name and
    by its full path; a program the policy does not deny still runs."""
    work, chorus_home, bin_dir = tmp_path / "work", tmp_path / "ch", tmp_path / "bin"
    for folder in (work, chorus_home, bin_dir):
        folder.mkdir()
    fake = bin_dir / "shutdown"
    fake.write_text("#!/bin/sh\necho really-shut-down\n")
    fake.chmod(0o755)
    env = {"HOME": str(tmp_path), "PATH": f"{bin_dir}:/usr/bin:/bin"}
    box = layout(Policy(), work, env, chorus_home)
    assert ("shutdown", fake) in box.stub_targets
    wrapper = write_wrapper(tmp_path / "w.sh", str(bwrap_path()), box, Path("/bin/sh"))
    for command in ("sudo ls", f"{fake} -h now", "shutdown -h now"):
        done = subprocess.run([str(wrapper), "-c", command], capture_output=True, text=True)
        assert done.returncode == 126, (command, done.stderr)
        assert "[Chorus policy] denied this shell call [shell.denied_command]" in done.stderr
        assert "really-shut-down" not in done.stdout
    done = subprocess.run([str(wrapper), "-c", "echo fine"], capture_output=True, text=True)
    assert done.stdout == "fine\n"
    # A login shell resets PATH (as Codex's `bash -lc` does): bash's not-found handler,
    # exported by the sandbox, still names the policy for a program not installed.
    bash = write_wrapper(tmp_path / "b.sh", str(bwrap_path()), box, Path("/bin/bash"))
    done = subprocess.run([str(bash), "-lc", "sudo ls"], capture_output=True, text=True)
    assert done.returncode == 126, done.stderr
    assert "[shell.denied_command]: `sudo` is a denied command" in done.stderr
    done = subprocess.run([str(bash), "-lc", "no-such-tool"], capture_output=True, text=True)
    assert (done.returncode, "command not found" in done.stderr) == (127, True)


@pytest.mark.skipif(bwrap_path() is None, reason="bubblewrap is not installed")
def test_a_body_can_read_but_not_rewrite_its_clis_generated_rules(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Gemini's policy file lives in the temporary folder, which bodies may write:
    its folder is mounted read-only over that."""
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    rules = write_policy_file('[[rule]]\ntoolName = "x"\ndecision = "deny"\npriority = 1\n')
    work = tmp_path / "work"
    work.mkdir()
    box = layout(Policy(), work, {"HOME": str(tmp_path)}, tmp_path / "ch")
    assert rules.parent.resolve() in box.read_only
    wrapper = write_wrapper(tmp_path / "w.sh", str(bwrap_path()), box, Path("/bin/sh"))
    script = f"cat {rules}; echo allow-all > {rules}; touch {rules.parent}/new; touch ../tmp/ok"
    done = subprocess.run([str(wrapper), "-c", script], capture_output=True, text=True, cwd=work)
    assert 'decision = "deny"' in done.stdout  # readable
    assert "Read-only file system" in done.stderr
    assert 'decision = "deny"' in rules.read_text()
    assert not (rules.parent / "new").exists()
    assert (tmp_path / "tmp" / "ok").exists()  # the rest of tmp stays writable
