"""The sandbox's command line and layout, from a policy and what exists on disk."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
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
        read_only=(tmp_path / "home" / "memory",),
        tmp=tmp_path,
        visible=(tmp_path / "body-home", Path("/usr/bin")),
    )
    line = argv("/usr/bin/bwrap", box, ["claude", "-p"])
    assert line[:5] == ["/usr/bin/bwrap", "--unshare-pid", "--ro-bind", "/", "/"]
    paths = (tmp_path, tmp_path / "body-home", *box.writable, box.chorus_home, *box.shared)
    order = [line.index(str(p)) for p in paths]
    # A private tmp, what stays visible in it, writable, CHORUS_HOME hidden, shared back.
    assert order == sorted(order)
    assert line[order[0] - 1 : order[0] + 1] == ["--tmpfs", str(tmp_path)]
    assert line[order[1] - 1] == "--ro-bind"
    assert "/usr/bin" not in line  # outside tmp: nothing to bind back
    # TMPDIR: a folder in the private tmp, never tmp itself (Codex makes no helper
    # links in a CODEX_HOME under TMPDIR, and its own sandbox then fails).
    tmpdir = str(tmp_path / "chorus-tmp")
    assert ["--dir", tmpdir, "--setenv", "TMPDIR", tmpdir] == line[order[0] + 1 : order[0] + 6]
    assert line[line.index(str(tmp_path / "work" / ".env")) - 2 :][:2] == ["--ro-bind", "/dev/null"]
    memory = [i for i, a in enumerate(line) if a == str(tmp_path / "home" / "memory")]
    assert [line[i - 1] for i in memory[::2]] == ["--bind", "--ro-bind"]  # read-only wins
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
    box = layout(Policy(), work, {"HOME": str(home)}, chorus_home, cli="claude")
    assert box.writable == (
        work.resolve(),
        (home / ".claude").resolve(),
        (home / ".claude.json").resolve(),
        (home / ".cache" / "claude-cli-nodejs").resolve(),
    )
    assert (work / "sub" / ".env").resolve() in box.hidden_files
    assert (work / "key.pem").resolve() in box.hidden_files
    assert (home / ".ssh").resolve() in box.hidden_dirs
    assert box.chorus_home == chorus_home.resolve()
    assert (chorus_home / "memory").resolve() in box.shared
    assert (chorus_home / "memory").resolve() in box.read_only
    assert (home / ".claude" / "settings.json").resolve() in box.read_only
    assert box.tmp == Path("/tmp")
    assert home.resolve() in box.visible


def test_a_folder_inside_chorus_home_stays_reachable(tmp_path: Path) -> None:
    chorus_home = tmp_path / "ch"
    work = chorus_home / "worktrees" / "job"
    work.mkdir(parents=True)
    box = layout(Policy(), work, {"HOME": str(tmp_path)}, chorus_home)
    assert work.resolve() in box.shared  # bound back after CHORUS_HOME is hidden
    assert work.resolve() not in box.read_only


def test_the_workspace_stays_read_only_even_as_the_jobs_folder(tmp_path: Path) -> None:
    """Heartbeat jobs run in the workspace: they still cannot rewrite SOUL.md."""
    chorus_home = tmp_path / "ch"
    work = chorus_home / "workspace"
    work.mkdir(parents=True)
    box = layout(Policy(), work, {"HOME": str(tmp_path)}, chorus_home)
    assert work.resolve() in box.shared
    assert work.resolve() in box.read_only


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


@pytest.mark.skipif(bwrap_path() is None, reason="bubblewrap is not installed")
def test_a_sandboxed_body_cannot_reach_the_audit_log_its_head_or_the_vault_key(
    tmp_path: Path,
) -> None:
    """the audit chain's head and the key that signs it are out of a body's reach."""
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
    """Gemini's policy file lives in the shared temporary folder, which a body sees
    only as its private one: its folder is bound back read-only."""
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
    assert not (tmp_path / "tmp" / "ok").exists()  # the daemon's tmp is read-only too


@pytest.fixture
def real_tmp_file() -> Iterator[Path]:
    """A file in the shared /tmp, outside every folder a body needs."""
    path = Path("/tmp") / f"chorus-shared-{uuid.uuid4().hex[:8]}"
    path.write_text("shared\n")
    yield path
    path.unlink(missing_ok=True)


@pytest.mark.skipif(bwrap_path() is None, reason="bubblewrap is not installed")
def test_only_the_roots_the_clis_state_and_a_private_tmp_are_writable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, real_tmp_file: Path
) -> None:
    """The attack: a script appends to the home's startup files, the shared /tmp,
    memory and workspace, the CLI's settings; each fails or lands only in the body's
    own /tmp. Work folder, home and CHORUS_HOME all live under /tmp, as in tests."""
    work, home, chorus_home = tmp_path / "work", tmp_path / "body-home", tmp_path / "ch"
    daemon_home = tmp_path / "daemon-home"
    for folder in (work, home, chorus_home / "memory", chorus_home / "workspace"):
        folder.mkdir(parents=True)
    (daemon_home / ".ssh").mkdir(parents=True)
    (daemon_home / ".ssh" / "id_rsa").write_text("DAEMON-KEY")
    monkeypatch.setenv("HOME", str(daemon_home))  # the daemon's own home (Path.home())
    kept = {
        home / ".bashrc": "# rc\n",
        chorus_home / "memory" / "MEMORY.md": "- remembered\n",
        chorus_home / "workspace" / "SOUL.md": "soul\n",
        chorus_home / "workspace" / "HEARTBEAT.md": "- [ ] nothing\n",
        real_tmp_file: "shared\n",
    }
    for path, text in kept.items():
        path.write_text(text)
    box = layout(Policy(), work, {"HOME": str(home)}, chorus_home, cli="claude")
    wrapper = write_wrapper(tmp_path / "w.sh", str(bwrap_path()), box, Path("/bin/sh"))
    attacks = [f"echo pwned >> {p}" for p in kept]
    attacks += [
        "mkdir -p ~/.local/bin ~/.config/systemd/user",
        "echo '{\"hooks\": 1}' > ~/.claude/settings.json",
        f"cat {daemon_home}/.ssh/id_rsa",
        f"cat {chorus_home}/memory/MEMORY.md",  # still readable
        f"cat {real_tmp_file}",  # the shared /tmp is not even seen
        'echo "TMPDIR=$TMPDIR"; echo mine > /tmp/mine && cat /tmp/mine',
        "echo state > ~/.claude/projects.txt && echo STATE",
        "echo inside > inside.txt",
    ]
    env = {**os.environ, "HOME": str(home)}
    done = subprocess.run(
        [str(wrapper), "-c", "; ".join(attacks)], capture_output=True, text=True, cwd=work, env=env
    )
    assert all(path.read_text() == text for path, text in kept.items())
    assert not (home / ".local").exists()
    assert not (home / ".config").exists()
    assert (home / ".claude" / "settings.json").read_text() == "{}\n"
    assert "DAEMON-KEY" not in done.stdout
    assert "- remembered" in done.stdout
    assert "shared" not in done.stdout
    assert "TMPDIR=/tmp/chorus-tmp\nmine\n" in done.stdout
    assert not Path("/tmp/mine").exists()
    assert (home / ".claude" / "projects.txt").read_text() == "state\n"
    assert (work / "inside.txt").read_text() == "inside\n"
    assert done.stderr.count("Read-only file system") >= len(kept), done.stderr


@pytest.mark.skipif(bwrap_path() is None, reason="bubblewrap is not installed")
def test_a_program_under_tmp_still_runs(tmp_path: Path) -> None:
    """A CLI installed under /tmp (as tests' stand-ins are) is bound back into the
    private /tmp that hides the rest."""
    work = tmp_path / "work"
    work.mkdir()
    program = tmp_path / "bin" / "fake-cli"
    program.parent.mkdir()
    program.write_text('#!/bin/sh\necho ran "$@"\n')
    program.chmod(0o755)
    box = layout(
        Policy(), work, {"HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin"}, tmp_path / "ch"
    )
    wrapper = write_wrapper(tmp_path / "w.sh", str(bwrap_path()), box, program)
    done = subprocess.run([str(wrapper), "a"], capture_output=True, text=True, cwd=work)
    assert done.stdout == "ran a\n", done.stderr


@pytest.mark.skipif(bwrap_path() is None, reason="bubblewrap is not installed")
def test_a_node_cli_installed_under_tmp_keeps_its_package(tmp_path: Path) -> None:
    """A checkout under /tmp: the CLI is a ``.bin`` link to a script that loads a file
    beside it and one of its dependencies, all in the install's ``node_modules``; the
    rest of /tmp (here a file next to that folder) stays hidden."""
    work, modules = tmp_path / "work", tmp_path / "install" / "node_modules"
    work.mkdir()
    (modules / "cli" / "bundle").mkdir(parents=True)
    (modules / "dep").mkdir()
    (modules / "dep" / "index.sh").write_text("echo dep\n")
    (modules / "cli" / "bundle" / "chunk.sh").write_text("echo chunk\n")
    main = modules / "cli" / "bundle" / "main.sh"
    here = 'here=$(dirname "$(readlink -f "$0")")'
    peek = 'cat "$here/../../../secret" 2>/dev/null || echo hidden'
    main.write_text(
        f'#!/bin/sh\n{here}\n. "$here/chunk.sh"\n. "$here/../../dep/index.sh"\n{peek}\n'
    )
    main.chmod(0o755)
    (modules / ".bin").mkdir()
    (modules / ".bin" / "cli").symlink_to("../cli/bundle/main.sh")
    (tmp_path / "install" / "secret").write_text("not for the body")
    env = {"HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin"}
    box = layout(Policy(), work, env, tmp_path / "ch")
    wrapper = write_wrapper(tmp_path / "w.sh", str(bwrap_path()), box, modules / ".bin" / "cli")
    done = subprocess.run([str(wrapper)], capture_output=True, text=True, cwd=work)
    assert done.stdout == "chunk\ndep\nhidden\n", done.stderr


@pytest.mark.skipif(bwrap_path() is None, reason="bubblewrap is not installed")
def test_an_mcp_server_under_tmp_finds_its_venv_and_its_script(tmp_path: Path) -> None:
    """A stdio MCP server the body is given to start, from a checkout under /tmp: a
    virtual environment's Python (a package in its site-packages) running a script
    that imports a module beside it. Both are bound back read-only; a file next to
    them, and /tmp itself, stay hidden."""
    venv, server, work = tmp_path / "venv", tmp_path / "server", tmp_path / "work"
    base = Path(sys.executable).resolve()
    site = venv / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    for folder in (venv / "bin", site, server, work):
        folder.mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text(f"home = {base.parent}\n")
    (venv / "bin" / "python").symlink_to(base)
    (site / "from_venv.py").write_text("WHERE = 'venv'\n")
    (server / "beside.py").write_text("WHERE = 'beside'\n")
    peek = f"print(open({str(tmp_path / 'secret')!r}).read())"
    script = server / "serve.py"
    script.write_text(f"import from_venv, beside\nprint(from_venv.WHERE, beside.WHERE)\n{peek}\n")
    (tmp_path / "secret").write_text("not for the body")
    cli = tmp_path / "cli.sh"  # a CLI that starts the server it is given
    cli.write_text('#!/bin/sh\nexec "$@"\n')
    cli.chmod(0o755)
    launch = (str(venv / "bin" / "python"), str(script), "/tmp")
    env = {"HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin"}
    box = layout(Policy(), work, env, tmp_path / "ch", launches=[launch])
    assert Path("/tmp").resolve() not in box.visible
    wrapper = write_wrapper(tmp_path / "w.sh", str(bwrap_path()), box, cli)
    done = subprocess.run([str(wrapper), *launch[:2]], capture_output=True, text=True, cwd=work)
    assert done.stdout == "venv beside\n", done.stderr
    assert "No such file or directory" in done.stderr


def test_secrets_of_every_home_are_hidden(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The body's home (its environment), the daemon's (``Path.home()``) and the
    daemon user's password entry: ``~/.ssh`` and the like hidden in each."""
    homes = {name: tmp_path / name for name in ("body", "daemon", "passwd")}
    for home in homes.values():
        (home / ".ssh").mkdir(parents=True)
        (home / ".netrc").write_text("machine x password y")
    monkeypatch.setenv("HOME", str(homes["daemon"]))
    monkeypatch.setattr(
        "pwd.getpwuid", lambda uid: type("Entry", (), {"pw_dir": str(homes["passwd"])})()
    )
    work = tmp_path / "work"
    work.mkdir()
    box = layout(Policy(), work, {"HOME": str(homes["body"])}, tmp_path / "ch")
    for home in homes.values():
        assert (home / ".ssh").resolve() in box.hidden_dirs
        assert (home / ".netrc").resolve() in box.hidden_files
