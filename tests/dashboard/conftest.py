"""Fixtures for the dashboard: a daemon whose Claude talks to a scripted server,
with the dashboard on a free loopback port, and a logged-in HTTP client."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from chorus.daemon import DaemonClient, is_responding, stop_daemon
from chorus.testing import ModelServer, claude_env, free_port
from tests._wait import until
from tests.daemon.conftest import _idle, run_chorus

__all__ = [
    "DashDaemon",
    "csrf_of",
    "dash_with",
    "login_url",
    "module_dash",
    "shared_dash",
    "until",
    "write_config",
]


@dataclass
class DashDaemon:
    home: Path
    work: Path
    server: ModelServer
    port: int
    clients: list[httpx.Client] = field(default_factory=list)
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        if not self.procs:  # the first command finds a daemon (later ones may find none)
            self.start()
        return run_chorus(self.work, *args, timeout=timeout)

    def start(self) -> None:
        """Start the daemon unless it runs (the CLI's own autostart waits 20 s: too
        short on a busy machine); the process is waited for at teardown."""
        if is_responding():
            return
        log = (self.home / "daemon-start.log").open("ab")
        proc = subprocess.Popen(
            [sys.executable, "-m", "chorus.daemon"],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
        log.close()
        self.procs.append(proc)
        until(lambda: is_responding(0.5) or proc.poll() is not None, timeout=120)
        assert proc.poll() is None, (self.home / "daemon-start.log").read_text()[-2000:]

    def login_url(self, *, cli: bool = False) -> str:
        self.start()
        return login_url(self.work, cli=cli)

    def new_client(self, **options: Any) -> httpx.Client:
        """A client of the dashboard, closed at teardown (not logged in)."""
        client = httpx.Client(base_url=self.base, timeout=30, **options)
        self.clients.append(client)
        return client

    def client(self) -> httpx.Client:
        """A client logged in through a one-time URL (cookie set)."""
        client = self.new_client()
        resp = client.get(self.login_url(), follow_redirects=False)
        assert resp.status_code == 303, resp.text
        return client

    def csrf(self, client: httpx.Client) -> str:
        return csrf_of(client)

    def post(self, client: httpx.Client, path: str, body: Any) -> httpx.Response:
        headers = {"Origin": self.base, "X-CSRF-Token": self.csrf(client)}
        return client.post(path, json=body, headers=headers)

    @property
    def daemon(self) -> DaemonClient:
        return DaemonClient()


def login_url(work: Path, *, cli: bool = False) -> str:
    """A one-time login URL of this CHORUS_HOME's dashboard, as ``chorus dashboard``
    gets it from the daemon (a typer command costs a test about 0.6 s of CPU); with
    ``cli``, from that command itself run in ``work``."""
    if cli:
        done = run_chorus(work, "dashboard", "--json", "--no-open")
        assert done.returncode == 0, done.stderr
        return str(json.loads(done.stdout)["url"])
    status, raw = DaemonClient().request("POST", "/dashboard/login")
    assert status == 200, raw
    return str(json.loads(raw)["url"])


def csrf_of(client: httpx.Client) -> str:
    """The CSRF token of the dashboard's page, as a logged-in ``client`` gets it."""
    page = client.get("/").text
    marker = 'name="csrf" content="'
    start = page.index(marker) + len(marker)
    return page[start : page.index('"', start)]


def write_config(home: Path, env: dict[str, str], port: int, extra: list[str]) -> None:
    lines = ["[daemon]", "notifications = false", "[gateway]", "port = 0"]
    lines += ["[dashboard]", f"port = {port}", *extra, "[agents.claude.env]"]
    lines += [f"{k} = {json.dumps(v)}" for k, v in env.items()]
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text("\n".join(lines) + "\n")


@pytest.fixture
def dash_with(chorus_home: Path, tmp_path: Path) -> Iterator[Callable[..., DashDaemon]]:
    """``dash_with(*extra_config_lines)``: a configured home (the lines go after
    ``[dashboard] port``, so they may open tables of their own); the daemon is stopped
    at teardown."""
    work = tmp_path / "work"
    work.mkdir()
    made: list[DashDaemon] = []
    with ModelServer() as server:

        def make(*extra: str) -> DashDaemon:
            port = free_port()
            env = claude_env(tmp_path / "claude-home", server.url)
            write_config(chorus_home, env, port, list(extra))
            made.append(DashDaemon(chorus_home, work, server, port))
            return made[-1]

        yield make
        for dash in made:
            for client in dash.clients:
                client.close()
        stop_daemon()
        for dash in made:
            for proc in dash.procs:
                proc.wait(timeout=60)
    assert server.errors == []


@pytest.fixture(scope="module")
def module_dash(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DashDaemon]:
    """One home, scripted server and daemon with its dashboard (as ``dash_with()``
    makes) for a whole test module, started at once. Use ``shared_dash``."""
    root = tmp_path_factory.mktemp("module-dash")
    home, work = root / "chorus-home", root / "work"
    work.mkdir()
    with ModelServer() as server, pytest.MonkeyPatch.context() as env:
        env.setenv("CHORUS_HOME", str(home))
        env.setenv("CHORUS_MEMORY_EXTRACTION", "0")
        port = free_port()
        write_config(home, claude_env(root / "claude-home", server.url), port, [])
        dash = DashDaemon(home, work, server, port)
        dash.start()
        yield dash
        stop_daemon()
        for proc in dash.procs:
            proc.wait(timeout=60)
    assert server.errors == []


@pytest.fixture
def shared_dash(
    module_dash: DashDaemon, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> Iterator[DashDaemon]:
    """The module's dashboard daemon for a test that only submits jobs and reads its
    own (its jobs, flags, audit entries): the server's scenarios and requests reset, a
    work folder of its own, its clients closed and its jobs ended after it. A test
    that reconfigures or stops the daemon, or reads every job, takes ``dash_with``."""
    monkeypatch.setenv("CHORUS_HOME", str(module_dash.home))
    module_dash.server.reset()
    work = tmp_path / "work"
    work.mkdir()
    dash = DashDaemon(module_dash.home, work, module_dash.server, module_dash.port)
    dash.procs.append(module_dash.procs[0])  # started: ``run`` starts none
    yield dash
    for client in dash.clients:
        client.close()
    until(_idle, 60)
