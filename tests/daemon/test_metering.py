"""The meter's daemon side without a daemon: when a stated window is low enough to
route around, which bodies say they are unmetered and why, which values are hidden."""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from chorus.bodies import Channel
from chorus.config import ChorusConfig
from chorus.daemon._metering import DaemonMeter, low_until, unmetered
from chorus.meter import Window, close_meter, open_meter

POINT = Channel("127.0.0.1", 4567, b"k" * 32)


@pytest.fixture
def opened() -> Iterator[None]:
    open_meter(POINT)
    yield
    close_meter(POINT)


def test_a_window_at_or_under_the_reserve_is_low_until_it_resets() -> None:
    plenty = {"requests": Window(limit=500, remaining=400, reset_at=60.0)}
    assert low_until(plenty, 0.02, at=0.0) == 0.0
    low = {"requests": Window(500, 400, 60.0), "tokens": Window(100_000, 1_500, 90.0)}
    assert low_until(low, 0.02, at=0.0) == 90.0
    unknown = {"tokens": Window(limit=None, remaining=0, reset_at=None)}
    assert low_until(unknown, 0.02, at=0.0) == 0.0  # no limit stated: no share to judge
    none_left = {"requests": Window(limit=50, remaining=0, reset_at=None)}
    assert low_until(none_left, 0.0, at=10.0) == 70.0  # no reset said: a minute


def _sup(config: ChorusConfig, secrets: Any = None) -> Any:
    bodies = ["claude", "codex", "gemini"]
    return SimpleNamespace(config=config, router=SimpleNamespace(bodies=bodies), secrets=secrets)


def test_logins_that_cannot_take_a_base_url_are_said_unmetered(
    opened: None, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GEMINI_BASE_URL", "CODEX_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.codex/config.toml: built-in provider
    found = unmetered(_sup(ChorusConfig()))
    assert set(found) == {"codex", "gemini"}
    assert "ChatGPT login" in found["codex"]
    assert "Google login" in found["gemini"]
    keyed = ChorusConfig.model_validate({"agents": {"gemini": {"env": {"GEMINI_API_KEY": "k"}}}})
    assert set(unmetered(_sup(keyed))) == {"codex"}


def test_credentials_of_the_config_and_the_vault_are_the_secrets(opened: None) -> None:
    config = ChorusConfig.model_validate(
        {
            "agents": {
                "claude": {"env": {"ANTHROPIC_API_KEY": "sk-1234567", "ANTHROPIC_MODEL": "opus"}},
                "codex": {"env": {"GITHUB_TOKEN": "ghp_abcdef", "RUST_LOG": "debug"}},
            }
        }
    )
    vault = SimpleNamespace(items=lambda: {"DB_PASSWORD": "hunter2hunter2"})
    meter = DaemonMeter.__new__(DaemonMeter)
    meter.sup = _sup(config, vault)
    assert meter.secrets() == {
        "ANTHROPIC_API_KEY": "sk-1234567",
        "GITHUB_TOKEN": "ghp_abcdef",
        "DB_PASSWORD": "hunter2hunter2",
    }
    off = ChorusConfig.model_validate({"meter": {"hide_secrets": False}})
    meter.sup = _sup(off, vault)
    assert meter.secrets() == {}
