"""How bodies are pointed at the meter: signed upstreams, each CLI's own knob."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from chorus.bodies import Channel
from chorus.meter import close_meter, codex_provider, meter_url, open_meter, point_body, resolve
from chorus.testing import codex_config

KEY = b"k" * 32
CHANNEL = Channel("127.0.0.1", 4567, KEY)


@pytest.fixture
def opened() -> Iterator[Channel]:
    open_meter(CHANNEL)
    yield CHANNEL
    close_meter(CHANNEL)


def _rest(url: str) -> str:
    return url.split("/meter", 1)[1]


def test_a_signed_upstream_resolves_only_for_its_session_and_api() -> None:
    url = meter_url(CHANNEL, "s1", "gemini", "http://127.0.0.1:9/lanes/g")
    target = resolve(KEY, "s1", _rest(url) + "/v1beta/models/m:generateContent")
    assert target is not None
    assert (target.api, target.upstream) == ("gemini", "http://127.0.0.1:9/lanes/g")
    assert target.path == "/v1beta/models/m:generateContent"
    assert resolve(KEY, "s2", _rest(url)) is None
    assert resolve(b"x" * 32, "s1", _rest(url)) is None
    assert resolve(KEY, "s1", _rest(url).replace("/gemini/", "/openai/")) is None
    assert resolve(KEY, "s1", "/gemini/!!!.abc/x") is None
    assert resolve(KEY, "s1", "/nothing") is None


def test_nothing_is_pointed_without_a_meter() -> None:
    assert point_body("claude", {"ANTHROPIC_BASE_URL": "http://x"}, "s1").env == {}


def test_claude_and_gemini_get_their_base_url_env(opened: Channel) -> None:
    claude = point_body("claude", {}, "s1").env["ANTHROPIC_BASE_URL"]
    target = resolve(KEY, "s1", _rest(claude))
    assert target is not None
    assert target.upstream == "https://api.anthropic.com"
    gemini = point_body("gemini", {"GOOGLE_GEMINI_BASE_URL": "http://h:1/"}, "s1").env
    target = resolve(KEY, "s1", _rest(gemini["GOOGLE_GEMINI_BASE_URL"]))
    assert target is not None
    assert target.upstream == "http://h:1"


def test_codex_gets_its_custom_providers_base_url_overridden(
    opened: Channel, tmp_path: Path
) -> None:
    (tmp_path / "config.toml").write_text(codex_config("http://127.0.0.1:5/lanes/codex"))
    env = {"CODEX_HOME": str(tmp_path)}
    assert codex_provider(env) == ("fake", "http://127.0.0.1:5/lanes/codex/v1")
    pointed = point_body("codex", env, "s1")
    assert pointed.env == {}
    flag, value = pointed.args
    key, _, url = value.partition("=")
    assert (flag, key) == ("-c", "model_providers.fake.base_url")
    target = resolve(KEY, "s1", _rest(json.loads(url)))
    assert target is not None
    assert target.upstream == "http://127.0.0.1:5/lanes/codex/v1"


@pytest.mark.parametrize(
    "config",
    [
        "",
        'model_provider = "openai"\n',
        "not toml [",
        'model_provider = "x"\n',
        'profile = "p"\n[profiles.p]\nmodel_provider = "openai"\n',
    ],
)
def test_codex_left_alone_without_a_custom_provider(
    opened: Channel, tmp_path: Path, config: str
) -> None:
    (tmp_path / "config.toml").write_text(config)
    assert point_body("codex", {"CODEX_HOME": str(tmp_path)}, "s1").args == ()


def test_a_codex_profile_names_the_provider(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text(
        'profile = "p"\n[profiles.p]\nmodel_provider = "my-p"\n'
        '[model_providers.my-p]\nbase_url = "https://llm.example/v1"\n'
    )
    assert codex_provider({"CODEX_HOME": str(tmp_path)}) == ("my-p", "https://llm.example/v1")


def test_gemini_without_an_api_key_is_left_alone(opened: Channel) -> None:
    assert point_body("gemini", {"HOME": "/x"}, "s1").env == {}  # a Google login
    assert "GOOGLE_GEMINI_BASE_URL" in point_body("gemini", {"GEMINI_API_KEY": "k"}, "s1").env
