"""Fixtures for gateway tests: an open store, a running in-process gateway whose bodies
are the real agent CLIs pointed at the scripted model server, and UCP clients."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from chorus._errors import AgentNotFoundError
from chorus.agents import find_agent
from chorus.config import AgentConfig, ChorusConfig
from chorus.events import Event, TurnCompleted, TurnFailed
from chorus.gateway import (
    ControlPolicy,
    Gateway,
    GatewayConfig,
    GatewaySettings,
    PolicyGuards,
    UcpClient,
    allow_all_controls,
)
from chorus.store import Redactor, SqliteStore
from chorus.testing import Cli, ModelServer, offline_env

#: Small limits so tests can reach them quickly; everything else is the default.
TEST_GATEWAY = GatewayConfig(
    port=0,
    token="test-token-0123456789abcdef",
    control_deadline_s=20.0,
    initialize_deadline_s=60.0,
    max_pending=8,
    rate_per_s=200.0,
    rate_burst=400,
)


@dataclass
class Harness:
    """A running gateway and what a test needs to reach it."""

    gateway: Gateway
    store: SqliteStore
    server: ModelServer
    work: Path
    token: str
    clis: list[Cli] = field(default_factory=list)

    @property
    def url(self) -> str:
        url = self.gateway.tcp_url
        assert url is not None
        return url

    def client(self, **kw: Any) -> contextlib.AbstractAsyncContextManager[UcpClient]:
        kw.setdefault("token", self.token)
        return UcpClient.connect(self.url, **kw)

    async def open_session(self, brain: UcpClient, cli: Cli, **fields: Any) -> dict[str, Any]:
        fields.setdefault("cwd", str(self.work))
        fields.setdefault("permission_mode", "bypassPermissions")
        return await brain.request("initialize", body=cli, timeout=90, **fields)


def cli_or_skip(cli: Cli) -> Path:
    try:
        return find_agent(cli)
    except AgentNotFoundError as exc:
        pytest.skip(f"{cli} CLI not installed: {exc}")


def is_turn_end(event: Event) -> bool:
    return isinstance(event, TurnCompleted | TurnFailed)


GatewayFactory = Callable[..., contextlib.AbstractAsyncContextManager[Harness]]
SettingsFactory = Callable[..., GatewaySettings]


@pytest.fixture
def gateway_settings() -> SettingsFactory:
    """``gateway_settings(max_pending=3, ...)``: the test gateway's settings with some changes."""

    def make(**changes: Any) -> GatewaySettings:
        return GatewaySettings(gateway=TEST_GATEWAY.model_copy(update=changes))

    return make


@pytest.fixture
async def store(chorus_home: Path) -> AsyncIterator[SqliteStore]:
    async with SqliteStore(redactor=Redactor()) as opened:
        yield opened


@pytest.fixture
def work(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    path.mkdir()
    return path


@pytest.fixture
def start_gateway(
    store: SqliteStore, model_server: ModelServer, work: Path, tmp_path: Path
) -> GatewayFactory:
    """``async with start_gateway(settings=..., control_policy=..., guards=...) as harness``: a
    gateway whose claude/codex/gemini bodies talk to ``model_server`` (CLIs not installed
    are left out)."""

    @contextlib.asynccontextmanager
    async def start(
        settings: GatewaySettings | None = None,
        control_policy: ControlPolicy = allow_all_controls,
        guards: PolicyGuards | None = None,
    ) -> AsyncIterator[Harness]:
        agents, clis = {}, []
        for cli in ("claude", "codex", "gemini"):
            try:
                find_agent(cli)
            except AgentNotFoundError:
                continue
            env = offline_env(cli, tmp_path / f"{cli}-home", model_server.url)
            agents[cli] = AgentConfig(env=env)
            clis.append(cli)
        config = ChorusConfig(agents=agents)
        settings = settings or GatewaySettings(gateway=TEST_GATEWAY)
        gateway = Gateway(store, config, settings, control_policy=control_policy, guards=guards)
        async with gateway.running():
            token = settings.gateway.token
            assert token is not None
            yield Harness(gateway, store, model_server, work, token, clis)

    return start


@pytest.fixture
async def harness(start_gateway: GatewayFactory) -> AsyncIterator[Harness]:
    async with start_gateway() as running:
        yield running
