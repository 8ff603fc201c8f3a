"""Secrets: AES-256-GCM at rest, a 0600 key, env only by policy, never in the clear on disk."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from chorus.bodies import PermissionAsk
from chorus.events import ToolCall
from chorus.policy import (
    AuditLog,
    FileKey,
    FlagBoard,
    InvalidSecretError,
    KeyFileModeError,
    KeyringKey,
    Policy,
    SecretNotFoundError,
    SecretStore,
    SecretStoreError,
    default_key_source,
    policy_callback,
    scan_for_leaks,
)
from chorus.store import Redactor

TOKEN = "ghp_0123456789abcdefghijABCDEFGHIJ0123"
PASSWORD = "correct horse battery staple"


@pytest.fixture
def store(chorus_home: Path) -> SecretStore:
    return SecretStore(key_source=FileKey(chorus_home / "secrets" / "master.key"))


def test_set_list_get_rm_round_trip(store: SecretStore) -> None:
    store.set("GITHUB_TOKEN", TOKEN)
    store.set("DB_PASSWORD", PASSWORD)
    assert [s.name for s in store.entries()] == ["DB_PASSWORD", "GITHUB_TOKEN"]
    assert store.get("GITHUB_TOKEN") == TOKEN
    first = store.entries()[1]
    store.set("GITHUB_TOKEN", TOKEN + "x")
    again = store.entries()[1]
    assert (again.created, store.get("GITHUB_TOKEN")) == (first.created, TOKEN + "x")
    store.rm("GITHUB_TOKEN")
    assert [s.name for s in store.entries()] == ["DB_PASSWORD"]
    with pytest.raises(SecretNotFoundError):
        store.rm("GITHUB_TOKEN")
    with pytest.raises(SecretNotFoundError):
        store.get("GITHUB_TOKEN")


def test_key_file_and_store_are_private(store: SecretStore, chorus_home: Path) -> None:
    store.set("GITHUB_TOKEN", TOKEN)
    key = chorus_home / "secrets" / "master.key"
    assert oct(key.stat().st_mode & 0o777) == "0o600"
    assert len(key.read_bytes()) == 32
    assert oct(store.path.stat().st_mode & 0o777) == "0o600"
    assert oct(store.path.parent.stat().st_mode & 0o777) == "0o700"


def test_a_key_file_others_can_read_is_refused(store: SecretStore, chorus_home: Path) -> None:
    store.set("GITHUB_TOKEN", TOKEN)
    key = chorus_home / "secrets" / "master.key"
    key.chmod(0o644)
    fresh = SecretStore(key_source=FileKey(key))
    with pytest.raises(KeyFileModeError, match="chmod 600"):
        fresh.get("GITHUB_TOKEN")


def test_ciphertext_holds_no_plaintext(store: SecretStore) -> None:
    store.set("GITHUB_TOKEN", TOKEN)
    raw = store.path.read_bytes()
    assert TOKEN.encode() not in raw
    assert base64.b64encode(TOKEN.encode()) not in raw
    entry = json.loads(raw)["secrets"]["GITHUB_TOKEN"]
    assert len(base64.b64decode(entry["nonce"])) == 12
    assert len(base64.b64decode(entry["ciphertext"])) == len(TOKEN) + 16  # GCM tag


def test_nonces_are_fresh(store: SecretStore) -> None:
    store.set("A_SECRET", TOKEN)
    one = json.loads(store.path.read_text())["secrets"]["A_SECRET"]
    store.set("A_SECRET", TOKEN)
    two = json.loads(store.path.read_text())["secrets"]["A_SECRET"]
    assert one["nonce"] != two["nonce"]
    assert one["ciphertext"] != two["ciphertext"]


def test_tampering_or_a_wrong_key_cannot_decrypt(store: SecretStore, tmp_path: Path) -> None:
    store.set("A_SECRET", TOKEN)
    store.set("B_SECRET", PASSWORD)
    data = json.loads(store.path.read_text())
    data["secrets"]["A_SECRET"], data["secrets"]["B_SECRET"] = (
        data["secrets"]["B_SECRET"],
        data["secrets"]["A_SECRET"],
    )
    store.path.write_text(json.dumps(data))
    with pytest.raises(SecretStoreError, match="altered"):
        store.get("A_SECRET")  # the name is bound into the ciphertext
    other = SecretStore(key_source=FileKey(tmp_path / "other.key"))
    with pytest.raises(SecretStoreError):
        other.get("B_SECRET")


@pytest.mark.parametrize(("name", "value"), [("1BAD", TOKEN), ("bad-name", TOKEN), ("OK", "short")])
def test_bad_names_and_short_values_are_refused(store: SecretStore, name: str, value: str) -> None:
    with pytest.raises(InvalidSecretError):
        store.set(name, value)


def test_env_only_for_names_the_policy_allows(store: SecretStore) -> None:
    store.set("GITHUB_TOKEN", TOKEN)
    store.set("DB_PASSWORD", PASSWORD)
    policy = Policy.model_validate(
        {
            "secrets": {
                "env_allowed": ["GITHUB_TOKEN", "MISSING"],
                "body_env": {"codex": ["DB_PASSWORD"]},
            }
        }
    )
    assert store.env_for("claude", policy) == {"GITHUB_TOKEN": TOKEN}
    assert store.env_for("codex", policy) == {"GITHUB_TOKEN": TOKEN, "DB_PASSWORD": PASSWORD}
    assert store.env_for("claude", Policy()) == {}


def test_the_file_key_is_used_without_a_keyring_backend(
    chorus_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import keyring
    from keyring.backends import fail

    monkeypatch.delenv("CHORUS_KEYRING")
    previous = keyring.get_keyring()
    keyring.set_keyring(fail.Keyring())
    try:
        assert isinstance(default_key_source(chorus_home), FileKey)
    finally:
        keyring.set_keyring(previous)


def test_the_keyring_holds_the_key_when_it_has_a_backend(
    chorus_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import keyring
    from keyring.backend import KeyringBackend

    class MemoryKeyring(KeyringBackend):
        """A real (in-memory) keyring backend, to exercise the keyring path."""

        priority = 1  # type: ignore[assignment]

        def __init__(self) -> None:
            super().__init__()
            self.items: dict[tuple[str, str], str] = {}

        def get_password(self, service: str, username: str) -> str | None:
            return self.items.get((service, username))

        def set_password(self, service: str, username: str, password: str) -> None:
            self.items[(service, username)] = password

        def delete_password(self, service: str, username: str) -> None:
            self.items.pop((service, username), None)

    monkeypatch.delenv("CHORUS_KEYRING")
    previous = keyring.get_keyring()
    backend = MemoryKeyring()
    keyring.set_keyring(backend)
    try:
        source = default_key_source(chorus_home)
        assert isinstance(source, KeyringKey)
        SecretStore(key_source=source).set("GITHUB_TOKEN", TOKEN)
        assert SecretStore(key_source=KeyringKey(source.username)).get("GITHUB_TOKEN") == TOKEN
        assert len(backend.items) == 1
        assert not (chorus_home / "secrets" / "master.key").exists()
        monkeypatch.setenv("CHORUS_KEYRING", "file")
        assert isinstance(default_key_source(chorus_home), FileKey)
    finally:
        keyring.set_keyring(previous)


def test_the_leak_checker_finds_a_plain_copy(store: SecretStore, chorus_home: Path) -> None:
    store.set("GITHUB_TOKEN", TOKEN)
    (chorus_home / "sessions").mkdir()
    (chorus_home / "sessions" / "s1.jsonl").write_text(json.dumps({"text": f"token {TOKEN}"}))
    (chorus_home / "b64.txt").write_text(base64.b64encode(TOKEN.encode()).decode())
    leaks = scan_for_leaks(store.items(), chorus_home, chunk=16)  # tiny chunks: overlap matters
    assert {(leak.path.name, leak.form) for leak in leaks} == {
        ("s1.jsonl", "plain"),
        ("b64.txt", "base64"),
    }


async def test_seeded_secrets_are_nowhere_under_chorus_home_after_use(
    store: SecretStore, chorus_home: Path, tmp_path: Path
) -> None:
    """Use secrets the ways a session does, then search every file for them."""
    redactor = Redactor()
    store.set("GITHUB_TOKEN", TOKEN)
    store.set("DB_PASSWORD", PASSWORD)
    assert store.register_with(redactor) == 2
    audit = AuditLog(redactor=redactor)
    gate = policy_callback(
        Policy.model_validate({"ask": {"timeout_s": 0.1}}),
        audit,
        flags=FlagBoard(redactor=redactor, poll_interval=0.02),
        secrets=store.values,
    )
    work = tmp_path / "work"
    work.mkdir()
    env = store.env_for(
        "claude", Policy.model_validate({"secrets": {"env_allowed": ["GITHUB_TOKEN"]}})
    )
    assert env == {"GITHUB_TOKEN": TOKEN}
    # A model that somehow saw the token tries to use it literally; a risky call raises a flag.
    asks = [
        PermissionAsk(
            "claude",
            "shell",
            "Bash",
            {"command": f"git push https://{TOKEN}@github.com/x"},
            cwd=str(work),
        ),
        PermissionAsk(
            "claude",
            "shell",
            "Bash",
            {"command": f"echo '{PASSWORD}' > db.txt && git push"},
            cwd=str(work),
        ),
        PermissionAsk(
            "claude", "shell", "Bash", {"command": "git push origin main"}, cwd=str(work)
        ),
    ]
    answers = [await gate(ask) for ask in asks]
    assert [a.decision for a in answers] == ["deny", "deny", "deny"]
    assert all(TOKEN not in (a.reason or "") and PASSWORD not in (a.reason or "") for a in answers)
    gate.observe(ToolCall(call_id="c", tool="shell", native_tool="Bash", input={"command": TOKEN}))
    audit.append("note", {"env": env, "password": PASSWORD})
    assert audit.verify().ok
    assert list((chorus_home / "flags").glob("*.json"))  # a flag was written, redacted
    assert scan_for_leaks(store.items(), chorus_home) == []
