"""The gateway's small parts on their own: limits, metrics text, config, token file,
brain URL rules and backoff, and the public surface."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

import chorus.gateway
from chorus._errors import ConfigError
from chorus.gateway import (
    BrainConfig,
    BrainUrlError,
    GatewayCode,
    GatewayConfig,
    GatewayMetrics,
    GatewayTokenError,
    PendingRequests,
    RequestError,
    TokenBucket,
    backoff_delay,
    check_brain_url,
    gateway_token,
    load_gateway_settings,
    token_path,
)


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_token_bucket_allows_the_burst_then_the_rate() -> None:
    clock = FakeClock()
    bucket = TokenBucket(rate=2.0, burst=3, clock=clock)
    assert [bucket.take() for _ in range(4)] == [True, True, True, False]
    clock.now += 0.5  # one token back at 2/s
    assert [bucket.take() for _ in range(2)] == [True, False]
    clock.now += 100  # refills to the burst, not beyond
    assert sum(bucket.take() for _ in range(10)) == 3


def test_pending_requests_cap_and_uniqueness() -> None:
    pending = PendingRequests(2)
    pending.add("a")
    with pytest.raises(RequestError) as dup:
        pending.add("a")
    pending.add("b")
    with pytest.raises(RequestError) as full:
        pending.add("c")
    assert dup.value.code is GatewayCode.DUPLICATE_REQUEST
    assert full.value.code is GatewayCode.TOO_MANY_PENDING
    pending.discard("a")
    pending.add("c")
    assert len(pending) == 2


def test_metrics_render_prometheus_text() -> None:
    metrics = GatewayMetrics()
    metrics.requests_total.inc("status", "claude")
    metrics.requests_total.inc("status", "claude")
    metrics.requests_total.inc("set_model", 'odd"body\n')
    for value in (0.5, 1.0, 7.0, 99999.0, 500000.0):
        metrics.control_response_latency_ms.observe(value, "status")
    metrics.add_gauge("sessions", "Live sessions.", lambda: 2)
    text = metrics.render()
    lines = text.splitlines()
    assert 'chorus_gateway_requests_total{body="claude",subtype="status"} 2.0' in lines
    assert 'chorus_gateway_requests_total{body="odd\\"body\\n",subtype="set_model"} 1.0' in lines
    assert metrics.requests_total.value("status", "claude") == 2
    bucket = "chorus_gateway_control_response_latency_ms_bucket{le="
    assert f'{bucket}"1.0",subtype="status"}} 2.0' in lines  # 0.5 and 1.0 (le is inclusive)
    assert f'{bucket}"10.0",subtype="status"}} 3.0' in lines
    assert f'{bucket}"120000.0",subtype="status"}} 4.0' in lines
    assert f'{bucket}"+Inf",subtype="status"}} 5.0' in lines
    assert 'chorus_gateway_control_response_latency_ms_count{subtype="status"} 5.0' in lines
    assert metrics.control_response_latency_ms.count("status") == 5
    assert "chorus_gateway_reconnect_attempts_total 0.0" in lines
    assert "chorus_gateway_sessions 2.0" in lines
    assert not any("_created" in line for line in lines)
    assert "# TYPE chorus_gateway_control_response_latency_ms histogram" in lines
    assert text.endswith("\n")


def test_settings_defaults_and_validation(chorus_home: Path) -> None:
    defaults = load_gateway_settings()
    assert (defaults.gateway.host, defaults.gateway.port) == ("127.0.0.1", 7719)
    brain = defaults.brain
    assert (brain.buffer, brain.max_attempts, brain.backoff_base_s) == (1000, 3, 1.0)
    assert (brain.backoff_max_s, brain.ping_interval_s) == (30.0, 10.0)
    chorus_home.mkdir(parents=True, exist_ok=True)
    config = chorus_home / "config.toml"
    config.write_text("[gateway]\nport = 0\n[brain]\nurl = 'wss://brain.example/ucp'\n")
    loaded = load_gateway_settings()
    assert loaded.gateway.port == 0
    assert loaded.brain.url == "wss://brain.example/ucp"
    config.write_text("[gateway]\nmax_pending = 0\nbogus = 1\n")
    with pytest.raises(ConfigError) as caught:
        load_gateway_settings()
    assert "max_pending" in str(caught.value)
    assert "bogus" in str(caught.value)
    config.write_text("[brain]\nurl_allowlist = ['(unclosed']\n")
    with pytest.raises(ConfigError, match="regular expression"):
        load_gateway_settings()


def test_token_file_is_created_private_and_reused(chorus_home: Path) -> None:
    config = GatewayConfig()
    token = gateway_token(config)
    assert len(token) >= 32
    assert stat.S_IMODE(token_path().stat().st_mode) == 0o600
    assert gateway_token(config) == token
    os.chmod(token_path(), 0o644)
    with pytest.raises(GatewayTokenError, match="chmod 600"):
        gateway_token(config)
    assert gateway_token(GatewayConfig(token="configured-token-123456")) == (
        "configured-token-123456"
    )


@pytest.mark.parametrize(
    ("url", "env", "allow", "ok"),
    [
        ("wss://brain.example/ucp", {}, [], True),
        ("ws://127.0.0.1:9000/ucp", {}, [], False),
        ("ws://127.0.0.1:9000/ucp", {"CHORUS_ALLOW_INSECURE_BRAIN": "1"}, [], True),
        ("ws://127.0.0.1:9000/ucp", {"CHORUS_ALLOW_INSECURE_BRAIN": "yes"}, [], False),
        ("https://brain.example/ucp", {}, [], False),
        ("wss:///nohost", {}, [], False),
        ("wss://brain.example/ucp", {}, [r"wss://brain\.example/.*"], True),
        ("wss://evil.example/ucp", {}, [r"wss://brain\.example/.*"], False),
        ("wss://brain.example.evil.com/ucp", {}, [r"wss://brain\.example/.*"], False),
        ("wss://[::1/", {}, [], False),
    ],
)
def test_brain_url_rules(url: str, env: dict[str, str], allow: list[str], ok: bool) -> None:
    config = BrainConfig(url_allowlist=allow)
    if ok:
        assert check_brain_url(url, config, environ=env) == url
    else:
        with pytest.raises(BrainUrlError):
            check_brain_url(url, config, environ=env)


def test_backoff_is_exponential_and_capped() -> None:
    config = BrainConfig(backoff_base_s=1.0, backoff_max_s=30.0)
    assert [backoff_delay(n, config) for n in range(1, 8)] == [1, 2, 4, 8, 16, 30, 30]


def test_public_surface_is_explicit() -> None:
    exported = set(chorus.gateway.__all__)
    assert exported == {name for name in dir(chorus.gateway) if not name.startswith("_")} - {
        "annotations"
    }
    for name in ("Gateway", "UcpClient", "GatewayCode", "decode_frame", "check_brain_url"):
        assert name in exported
