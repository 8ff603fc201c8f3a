"""Fixtures for daemon tests: a CHORUS_HOME whose config points the real CLIs at the
scripted model server, a ``chorus`` runner, and a daemon stopped at teardown."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import pytest

from chorus.daemon import DaemonClient, is_responding, stop_daemon
from chorus.events import parse_event
from chorus.store import JOB_TERMINAL
from chorus.testing import Cli, ModelServer, claude_env, offline_env
from tests._wait import until


def run_chorus(
    cwd: Path, *args: str, timeout: float = 120, home: Path | None = None, **options: Any
) -> subprocess.CompletedProcess[str]:
    """The real ``chorus`` CLI run in ``cwd`` with this test's environment (its
    CHORUS_HOME, or ``home``): its output as text. ``options`` go to ``subprocess.run``."""
    env = os.environ.copy() if home is None else {**os.environ, "CHORUS_HOME": str(home)}
    return subprocess.run(
        [sys.executable, "-m", "chorus", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        env=env,
        **options,
    )


@dataclass
class Node:
    """One daemon's home of several (a cluster); ``run`` drives the real chorus CLI
    against it."""

    home: Path
    work: Path

    def run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return run_chorus(self.work, *args, timeout=timeout, home=self.home)

    def json(self, *args: str) -> Any:
        done = self.run(*args, "--json")
        assert done.returncode == 0, done.stdout + done.stderr
        return json.loads(done.stdout)

    def pid(self) -> int:
        return int((self.home / "run" / "daemon.pid").read_text())


@dataclass
class Chorus:
    home: Path
    work: Path
    server: ModelServer

    def run(self, *args: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
        """Run the real ``chorus`` CLI in a subprocess (it autostarts the daemon)."""
        return run_chorus(self.work, *args, timeout=timeout)

    def popen(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-m", "chorus", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=self.work,
        )

    @property
    def client(self) -> DaemonClient:
        return DaemonClient()


def write_config(home: Path, agents: dict[str, dict[str, str]], extra: str = "") -> None:
    lines = ["[daemon]", "notifications = false", extra, "[gateway]", "port = 0"]
    lines += ["[dashboard]", "port = 0"]
    for name, env in agents.items():
        lines.append(f"[agents.{name}.env]")
        lines += [f"{key} = {json.dumps(value)}" for key, value in env.items()]
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text("\n".join(lines) + "\n")


@pytest.fixture
def chorus(chorus_home: Path, tmp_path: Path) -> Iterator[Chorus]:
    """A configured CHORUS_HOME with Claude pointed at a fresh scripted server."""
    work = tmp_path / "work"
    work.mkdir()
    with ModelServer() as server:
        env = claude_env(tmp_path / "claude-home", server.url)
        write_config(chorus_home, {"claude": env})
        yield Chorus(chorus_home, work, server)
        stop_daemon()
    assert server.errors == []


Wait = Callable[[Callable[[], bool], float], None]


BODIES: tuple[Cli, ...] = ("claude", "codex", "gemini")


@dataclass
class Daemon:
    home: Path
    work: Path
    server: ModelServer

    def run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return run_chorus(self.work, *args, timeout=timeout)

    def ask(self, *args: str) -> list[Any]:
        done = self.run("ask", *args, "--json")
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        return [parse_event(line) for line in done.stdout.splitlines()]

    @property
    def client(self) -> DaemonClient:
        return DaemonClient()

    def session_of(self, events: list[Any]) -> dict[str, Any]:
        return self.client.session(events[-1].session_id)

    def steer(self, job_id: str, text: str) -> dict[str, Any]:
        return self.client.steer(job_id, text)


def three_bodies_config(
    home: Path, tmp: Path, server: ModelServer, extra: list[str], dashboard: Sequence[str] = ()
) -> None:
    """``home/config.toml``: ``extra`` lines in ``[daemon]``, the gateway on a free
    port, ``[dashboard]`` with ``dashboard`` lines (else a free port), and the three
    CLIs on their lanes of ``server`` (their homes under ``tmp``)."""
    lines = ["[daemon]", "notifications = false", *extra, "[gateway]", "port = 0"]
    lines += ["[dashboard]", *(dashboard or ["port = 0"])]
    for cli in BODIES:
        env = offline_env(cli, tmp / f"{cli}-home", server.lane_url(cli))
        lines += [f"[agents.{cli}.env]", *(f"{k} = {json.dumps(v)}" for k, v in env.items())]
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text("\n".join(lines) + "\n")


@pytest.fixture
def daemon_with(chorus_home: Path, tmp_path: Path) -> Iterator[Callable[..., Daemon]]:
    """``daemon_with(*extra_daemon_lines)``: a home whose three CLIs use one scripted
    server (a lane each); the daemon is stopped at teardown."""
    with ModelServer() as server:
        work = tmp_path / "work"
        work.mkdir()

        def make(*extra: str) -> Daemon:
            three_bodies_config(chorus_home, tmp_path, server, list(extra))
            return Daemon(chorus_home, work, server)

        yield make
        stop_daemon()
    assert server.errors == []


def _module_home(
    request: pytest.FixtureRequest, factory: pytest.TempPathFactory
) -> Iterator[tuple[Path, Path, ModelServer]]:
    """A home, work folder and started scripted server for a whole test module, with
    CHORUS_HOME pointing at that home; the daemon (started by the first ``chorus``
    call) is stopped after the module's last test, then the server's errors checked."""
    root = factory.mktemp(f"module-{request.module.__name__.rsplit('.', 1)[-1]}")
    home, work = root / "chorus-home", root / "work"
    work.mkdir()
    with ModelServer() as server, pytest.MonkeyPatch.context() as env:
        env.setenv("CHORUS_HOME", str(home))
        env.setenv("CHORUS_MEMORY_EXTRACTION", "0")
        yield root, home, server
        # this home's daemon, whatever a test's own monkeypatch left in the
        # environment (a module fixture a test requested by name is finalized
        # after that test's monkeypatch was undone)
        env.setenv("CHORUS_HOME", str(home))
        stop_daemon()
    assert server.errors == []


def _config_of(request: pytest.FixtureRequest) -> list[str]:
    """The module's ``SHARED_DAEMON_CONFIG``: extra ``[daemon]`` lines (and further
    tables) for the daemon its tests share; none by default."""
    return list(getattr(request.module, "SHARED_DAEMON_CONFIG", ()))


@pytest.fixture(scope="module")
def module_daemon(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Daemon]:
    """One home, scripted server and daemon (the three bodies, a lane each, and the
    module's ``SHARED_DAEMON_CONFIG``) for a whole test module. Use ``shared_daemon``."""
    for root, home, server in _module_home(request, tmp_path_factory):
        three_bodies_config(home, root, server, _config_of(request))
        yield Daemon(home, root / "work", server)


@pytest.fixture(scope="module")
def module_chorus(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Chorus]:
    """One home, scripted server and daemon as ``chorus`` makes (Claude on the default
    lane) for a whole test module. Use ``shared_chorus``."""
    for root, home, server in _module_home(request, tmp_path_factory):
        env = claude_env(root / "claude-home", server.url)
        write_config(home, {"claude": env}, "\n".join(_config_of(request)))
        yield Chorus(home, root / "work", server)


def _idle() -> bool:
    """The daemon (if one runs) has no job queued or running."""
    if not is_responding():
        return True
    return all(j["state"] in JOB_TERMINAL for j in DaemonClient(autostart=False).jobs())


def _share(
    home: Path, server: ModelServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> Iterator[Path]:
    """A test's turn on a module's daemon: its ``chorus`` calls use the module's
    CHORUS_HOME, from a work folder of its own, with the server's scenarios and
    recorded requests reset; after the test, its jobs have ended (none of them runs
    on into the next test)."""
    monkeypatch.setenv("CHORUS_HOME", str(home))
    server.reset()
    work = tmp_path / "work"
    work.mkdir()
    yield work
    until(_idle, 60)


@pytest.fixture
def shared_daemon(
    module_daemon: Daemon, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> Iterator[Daemon]:
    """The module's daemon (as ``daemon_with(*SHARED_DAEMON_CONFIG)`` makes), for a test
    that only submits jobs and reads its own: see ``_share``. A test that stops,
    kills or reconfigures its daemon, or reads the daemon's whole history (every
    job, every session), takes ``daemon_with`` (a daemon of its own)."""
    for work in _share(module_daemon.home, module_daemon.server, monkeypatch, tmp_path):
        yield Daemon(module_daemon.home, work, module_daemon.server)


@pytest.fixture
def shared_chorus(
    module_chorus: Chorus, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> Iterator[Chorus]:
    """The module's ``chorus`` daemon, shared as ``shared_daemon`` is (same rules)."""
    for work in _share(module_chorus.home, module_chorus.server, monkeypatch, tmp_path):
        yield Chorus(module_chorus.home, work, module_chorus.server)


@dataclass
class TinyDisk:
    """A real, small filesystem (tmpfs) that a test can fill up and free again."""

    path: Path

    def fill(self) -> None:
        """Write until the filesystem refuses (ENOSPC)."""
        chunk = b"\0" * (1 << 16)
        with (self.path / "filler").open("wb", buffering=0) as file:
            while _fits(file, chunk):
                pass

    def free(self) -> None:
        (self.path / "filler").unlink()


def _fits(file: BinaryIO, chunk: bytes) -> bool:
    try:
        file.write(chunk)
    except OSError as exc:
        if exc.errno != errno.ENOSPC:
            raise
        return False
    return True


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[TinyDisk]:
    """A 32 MiB tmpfs mounted for the test (needs root: skipped elsewhere)."""
    mount = tmp_path / "tiny-disk"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=32m,mode=0700", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {done.stderr.strip()}")
    try:
        yield TinyDisk(mount)
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)
