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

from chorus.daemon import DaemonClient, stop_daemon
from chorus.events import parse_event
from chorus.testing import Cli, ModelServer, claude_env, offline_env


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


@pytest.fixture(scope="module")
def module_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    """One home, scripted server and daemon (started by the first ``chorus`` call) for
    a whole test module; stopped after its last test. Use ``shared_daemon``."""
    root = tmp_path_factory.mktemp("module-daemon")
    home, work = root / "chorus-home", root / "work"
    work.mkdir()
    with ModelServer() as server, pytest.MonkeyPatch.context() as env:
        env.setenv("CHORUS_HOME", str(home))
        env.setenv("CHORUS_MEMORY_EXTRACTION", "0")
        three_bodies_config(home, root, server, [])
        yield Daemon(home, work, server)
        stop_daemon()
    assert server.errors == []


@pytest.fixture
def shared_daemon(module_daemon: Daemon, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Daemon:
    """The module's daemon (as ``daemon_with()`` makes, without extra lines), for a test
    that only submits jobs and reads its own: the test's ``chorus`` calls use the
    module's CHORUS_HOME, in a work folder of the test's own. A test that stops,
    kills or reconfigures its daemon, or reads the server's or the daemon's whole
    history, takes ``daemon_with`` (a daemon of its own)."""
    monkeypatch.setenv("CHORUS_HOME", str(module_daemon.home))
    work = tmp_path / "work"
    work.mkdir()
    return Daemon(module_daemon.home, work, module_daemon.server)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The tests of a module that share its daemon run on one xdist worker (with
    ``--dist loadgroup``), so the module starts one daemon, not one per worker."""
    if not config.pluginmanager.hasplugin("xdist"):
        return
    for item in items:
        if "shared_daemon" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.xdist_group(f"daemon-{item.path.stem}"))


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
