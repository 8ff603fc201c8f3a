"""Redaction: seeded secrets of every kind never reach the database, WAL or mirror."""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from pathlib import Path

import pytest

from chorus.events import ErrorCode, ErrorInfo, Text, ToolCall, ToolResult, TurnFailed, Unknown
from chorus.store import (
    ControlStatus,
    JobState,
    RedactionError,
    Redactor,
    SqliteStore,
    Store,
    looks_secret_name,
)
from tests.store.conftest import db_rows


def _k(*parts: str) -> str:
    # Built from pieces so secret scanners do not flag this file for fake keys.
    return "".join(parts)


_PEM_BODY = "MIIEowIBAAKCAQEAzQ9x3fakefakefakeKEYbody0123456789abcdef"

#: kind -> (text that carries the secret, the secret itself)
SEEDED: dict[str, tuple[str, str]] = {
    "anthropic_key": (
        "key: " + _k("sk-", "ant-api03-", "Qw3rTy9UiOp4AsDfGh5JkLzXcVbNm1234-_x9"),
        _k("sk-", "ant-api03-", "Qw3rTy9UiOp4AsDfGh5JkLzXcVbNm1234-_x9"),
    ),
    "openai_key": (
        "use " + _k("sk-", "proj-", "Ab12Cd34Ef56Gh78Ij90Kl12Mn34Op56"),
        _k("sk-", "proj-", "Ab12Cd34Ef56Gh78Ij90Kl12Mn34Op56"),
    ),
    "google_api_key": (
        "g=" + _k("AI", "zaSyD4", "fakeGoogleKey0123456789abcdefghi"),
        _k("AI", "zaSyD4", "fakeGoogleKey0123456789abcdefghi"),
    ),
    "github_token": (
        "remote " + _k("gh", "p_", "R4nd0mGitHubT0kenValue0123456789abcd"),
        _k("gh", "p_", "R4nd0mGitHubT0kenValue0123456789abcd"),
    ),
    "github_pat": (
        _k("github", "_pat_", "11AAAAAAA0fakefinegrained_0123456789abcdefghijklmnop"),
        _k("github", "_pat_", "11AAAAAAA0fakefinegrained_0123456789abcdefghijklmnop"),
    ),
    "github_oauth": (
        "oauth " + _k("gh", "o_", "OauthTokenValue0123456789abcdefghijkl"),
        _k("gh", "o_", "OauthTokenValue0123456789abcdefghijkl"),
    ),
    "aws_access_key": (
        "id " + _k("AK", "IA", "QWERTYUIOP234567"),
        _k("AK", "IA", "QWERTYUIOP234567"),
    ),
    "aws_secret_key": (
        "aws_secret_access_key = " + _k("wJalrXUtnFEMI", "/K7MDENG/bPxRfiCYzzFAKEKEY"),
        _k("wJalrXUtnFEMI", "/K7MDENG/bPxRfiCYzzFAKEKEY"),
    ),
    "slack_token": (
        "slack " + _k("xo", "xb-", "1234567890-abcdefghijKLMN"),
        _k("xo", "xb-", "1234567890-abcdefghijKLMN"),
    ),
    "stripe_key": (
        "pay " + _k("sk", "_live_", "4eC39HqLyjWDarjtT1zdp7dc"),
        _k("sk", "_live_", "4eC39HqLyjWDarjtT1zdp7dc"),
    ),
    "huggingface_token": (
        "hub " + _k("hf", "_", "AbCdEfGhIjKlMnOpQrStUvWxYz01234567"),
        _k("hf", "_", "AbCdEfGhIjKlMnOpQrStUvWxYz01234567"),
    ),
    "jwt": (
        "cookie=" + _k("eyJhbGciOiJIUzI1NiJ9", ".eyJzdWIiOiJmYWtlIn0", ".c2lnbmF0dXJlZmFrZQ"),
        _k("eyJhbGciOiJIUzI1NiJ9", ".eyJzdWIiOiJmYWtlIn0", ".c2lnbmF0dXJlZmFrZQ"),
    ),
    "bearer_token": (
        "Authorization: Bearer opaqueBearerValue.0123456789",
        "opaqueBearerValue.0123456789",
    ),
    "private_key": (
        f"-----BEGIN RSA PRIVATE KEY-----\n{_PEM_BODY}\n-----END RSA PRIVATE KEY-----\n",
        _PEM_BODY,
    ),
    "url_password": ("postgres://admin:Pa55w0rdInUrl@db.local:5432/app", "Pa55w0rdInUrl"),
    "secret_assignment": ("export GITHUB_TOKEN=plain-env-value-42", "plain-env-value-42"),
    "password_assignment": ('DB_PASSWORD="correct horse battery"', "correct horse battery"),
    "custom": ("ticket corp-20250101 closed", "corp-20250101"),
    "secret": ("the vault says vault-only-s3cret-value", "vault-only-s3cret-value"),
}
CUSTOM_PATTERN = r"corp-[0-9]{8}"
KNOWN_SECRET = "vault-only-s3cret-value"


def _redactor() -> Redactor:
    redactor = Redactor([CUSTOM_PATTERN])
    redactor.add_secret(KNOWN_SECRET)
    return redactor


@pytest.mark.parametrize("name", sorted(SEEDED))
def test_each_seeded_secret_is_replaced_by_a_visible_marker(name: str) -> None:
    carrier, secret = SEEDED[name]
    redacted = _redactor().redact_text(carrier)
    assert secret not in redacted
    assert "[REDACTED:" in redacted


@pytest.mark.parametrize(
    "clean",
    [
        "the bearer of bad news",
        "a kebab-case sk-this-is-a-long-kebab-case-identifier",
        "MAX_TOKENS=5 and input_tokens=10",
        '{"tokenType": "bearer", "input_tokens": 5}',
        "https://example.com/path?x=1",
        "PWD=/home/me",
    ],
)
def test_ordinary_text_is_left_alone(clean: str) -> None:
    assert _redactor().redact_text(clean) == clean


def test_redaction_is_idempotent() -> None:
    redactor = _redactor()
    for carrier, _ in SEEDED.values():
        once = redactor.redact_text(carrier)
        assert redactor.redact_text(once) == once


def test_json_is_redacted_structurally_and_stays_valid() -> None:
    secret = SEEDED["anthropic_key"][1]
    line = json.dumps(
        {"type": "x", "text": f"key {secret}", "env": {"OPENAI_API_KEY": "plain"}, "n": 3}
    )
    redacted = Redactor().redact_line(line)
    decoded = json.loads(redacted)
    assert decoded == {
        "type": "x",
        "text": "key [REDACTED:anthropic_key]",
        "env": {"OPENAI_API_KEY": "[REDACTED:secret_field]"},
        "n": 3,
    }


def test_a_clean_line_is_kept_byte_for_byte() -> None:
    line = '{"a":  1, "b": "\\u00e9"}'
    assert Redactor().redact_line(line) is line


def test_secret_field_names() -> None:
    secret = ["GITHUB_TOKEN", "apiKey", "password", "AWS_SECRET_ACCESS_KEY", "client_secret"]
    plain = ["MAX_TOKENS", "tokenType", "input_tokens", "PWD", "secret_name", "path"]
    assert all(looks_secret_name(n) for n in secret)
    assert not any(looks_secret_name(n) for n in plain)


def test_unusable_patterns_and_secrets_are_refused() -> None:
    with pytest.raises(RedactionError):
        Redactor(["(unclosed"])
    with pytest.raises(RedactionError):
        Redactor().add_secret("abc")


def test_a_known_secret_is_caught_in_its_json_escaped_form() -> None:
    redactor = Redactor()
    redactor.add_secret('pa"ss\\word')
    raw = json.dumps({"note": 'pa"ss\\word'})
    assert "pa" not in Redactor.redact_text(redactor, raw).replace('"note"', "")


def test_the_logging_filter_redacts_messages() -> None:
    record = logging.LogRecord(
        "t", logging.INFO, __file__, 1, "got %s", ("x " + KNOWN_SECRET,), None
    )
    assert _redactor().logging_filter().filter(record)
    assert record.getMessage() == "got x [REDACTED:secret]"


def test_the_logging_filter_redacts_tracebacks() -> None:
    try:
        raise RuntimeError(f"failed with {KNOWN_SECRET}")
    except RuntimeError:
        record = logging.LogRecord("t", logging.ERROR, __file__, 1, "boom", None, sys.exc_info())
    _redactor().logging_filter().filter(record)
    formatted = logging.Formatter().format(record)
    assert KNOWN_SECRET not in formatted
    assert "failed with [REDACTED:secret]" in formatted


def _grep_home(home: Path, needles: list[str]) -> dict[str, list[str]]:
    """Which needles occur in the bytes of which files under ``home``."""
    found: dict[str, list[str]] = {}
    for path in sorted(p for p in home.rglob("*") if p.is_file()):
        data = path.read_bytes()
        hits = [n for n in needles if n.encode() in data]
        if hits:
            found[str(path.relative_to(home))] = hits
    return found


async def _write_everything(store: Store) -> None:
    carriers = [carrier for carrier, _ in SEEDED.values()]
    session = await store.create_session(
        "claude",
        session_id="leaky",
        transport={"env": {"ANTHROPIC_API_KEY": "plain-transport-secret"}},
    )
    sid = session.id
    for i, carrier in enumerate(carriers):
        await store.append_many(
            sid,
            [
                Text(text=carrier),
                ToolCall(
                    call_id="c",
                    tool="shell",
                    native_tool="Bash",
                    input={"command": carrier, "env": {"GITHUB_TOKEN": "plain-input-secret"}},
                ),
                ToolResult(call_id="c", output=f"line 1\n{carrier}\nline 3"),
                Unknown(raw=json.dumps({"type": "weird", "payload": carrier})),
                TurnFailed(error=ErrorInfo(code=ErrorCode.AUTH, message=carrier)),
            ],
        )
        await store.append_raw(sid, "stdout", json.dumps({"type": "assistant", "text": carrier}))
        await store.append_raw(sid, "stderr", carrier)
        job = await store.create_job(carrier, options={"token": "plain-option-secret"})
        await store.claim_next_job()
        await store.update_job(job.id, state=JobState.FAILED, error={"message": carrier})
        request = await store.record_control_request(sid, f"r-{i}", "x", {"c": carrier})
        await store.record_control_response(
            sid, request.request_id, status=ControlStatus.OK, response={"c": carrier}
        )


async def test_no_seeded_secret_reaches_any_file_under_chorus_home(chorus_home: Path) -> None:
    chorus_home.mkdir(parents=True, exist_ok=True)
    (chorus_home / "config.toml").write_text(f"redact_patterns = [{json.dumps(CUSTOM_PATTERN)}]\n")
    needles = [secret for _, secret in SEEDED.values()]
    needles += ["plain-transport-secret", "plain-input-secret", "plain-option-secret"]
    store = SqliteStore()  # redact_patterns come from config.toml
    store.redactor.add_secret(KNOWN_SECRET)
    async with store:
        await _write_everything(store)
        assert (chorus_home / "chorus.db-wal").exists()
        assert _grep_home(chorus_home, needles) == {}  # database, WAL and mirror, live
        events = await store.read_events("leaky")
        assert len(events) == 5 * len(SEEDED)  # still valid JSON after redaction
    assert _grep_home(chorus_home, needles) == {}  # and after the checkpoint on close
    mirror = (chorus_home / "sessions" / "leaky.jsonl").read_text()
    for kind in ("anthropic_key", "private_key", "custom", "secret", "secret_field"):
        assert f"[REDACTED:{kind}]" in mirror


# -- stored record fields ------------------------------------------------------


async def test_session_model_cwd_and_native_id_are_redacted_when_stored(store: Store) -> None:
    secret = "".join(["opq", "Vw9", "Zt4", "Lx2"])
    store.redactor.add_secret(secret)
    record = await store.create_session(
        "testbody", model=f"m-{secret}", cwd=f"/work/{secret}", native_session_id=secret
    )
    await store.update_session(record.id, model=f"other-{secret}")
    rows = await asyncio.to_thread(
        db_rows,
        store,
        f"SELECT model, cwd, native_session_id FROM sessions WHERE id = '{record.id}'",
    )
    stored = " ".join(str(v) for v in rows[0])
    assert secret not in stored
    assert stored.count("[REDACTED:secret]") == 3
    assert (await store.get_session(record.id)).model == "other-[REDACTED:secret]"
