"""the audit chain holds against a writer who can edit its files but not
read the vault key, and a torn last line is repaired instead of failing every append."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from chorus.policy import AuditError, AuditLog
from chorus.policy._audit import GENESIS, entry_hash
from chorus.policy._secrets import FileKey


def filled(n: int = 4, key: FileKey | None = None) -> AuditLog:
    log = AuditLog(key=key)
    for i in range(n):
        log.append("tool_call", {"i": i}, session_id="s")
    return log


def head_of(log: AuditLog) -> dict[str, Any]:
    head: dict[str, Any] = json.loads(log.head_path.read_text())
    return head


def set_head(log: AuditLog, head: dict[str, Any]) -> None:
    log.head_path.write_text(json.dumps(head))


def forged_chain(n: int) -> list[str]:
    """A chain an attacker builds with correct SHA-256 links and made-up MACs."""
    prev, out = GENESIS, []
    for seq in range(n):
        fields = {
            "seq": seq,
            "ts": 1.0,
            "kind": "tool_call",
            "session_id": None,
            "data": {"forged": True},
            "prev": prev,
        }
        digest = entry_hash(fields)
        out.append(json.dumps({**fields, "hash": digest, "mac": hashlib.sha256(b"x").hexdigest()}))
        prev = digest
    return out


def test_entries_and_head_are_signed_and_verify() -> None:
    log = filled()
    entries = list(log.entries())
    assert all(len(e.mac) == 64 for e in entries)
    assert set(head_of(log)) == {"seq", "hash", "mac"}
    assert log.verify().ok


def test_a_whole_chain_rebuilt_without_the_key_is_found() -> None:
    log = filled()
    log.path.write_text("".join(line + "\n" for line in forged_chain(4)))
    result = log.verify()
    assert not result.ok
    assert result.seq == 0
    assert "not signed" in result.problem


def test_another_homes_key_does_not_verify(tmp_path: Path) -> None:
    log = filled()
    stranger = AuditLog(log.path, key=FileKey(tmp_path / "other.key"))
    assert "not signed" in stranger.verify().problem


def test_a_missing_head_with_a_non_empty_log_is_tampering() -> None:
    log = filled()
    log.head_path.unlink()
    result = log.verify()
    assert not result.ok
    assert "missing" in result.problem


def test_a_missing_head_with_an_empty_log_is_fine() -> None:
    assert AuditLog().verify().ok


def test_a_head_older_than_the_log_is_tampering() -> None:
    log = filled()
    head = head_of(log)
    entries = list(log.entries())
    old = {"seq": 1, "hash": entries[1].hash}
    set_head(log, {**old, "mac": log._head_mac(1, entries[1].hash)})  # a genuine older head
    assert head["seq"] == 3
    result = log.verify()
    assert not result.ok
    assert "goes on to 3" in result.problem


@pytest.mark.parametrize("seq", ["3", 3.0, None, True, -1])
def test_a_head_with_a_non_integer_seq_is_tampering(seq: object) -> None:
    log = filled()
    set_head(log, {**head_of(log), "seq": seq})
    result = log.verify()
    assert not result.ok
    assert "seq" in result.problem


def test_unknown_fields_in_the_head_are_tampering() -> None:
    log = filled()
    set_head(log, {**head_of(log), "note": "trust me"})
    assert "unknown fields: note" in log.verify().problem


def test_unknown_fields_in_an_entry_are_tampering() -> None:
    log = filled()
    raw = log.path.read_text().splitlines()
    entry = json.loads(raw[2])
    entry["approved_by"] = "admin"
    raw[2] = json.dumps(entry)
    log.path.write_text("".join(line + "\n" for line in raw))
    result = log.verify()
    assert (result.seq, result.line) == (2, 3)
    assert "unknown fields: approved_by" in result.problem


def test_a_head_resigned_without_the_key_is_tampering() -> None:
    log = filled()
    set_head(log, {**head_of(log), "mac": "0" * 64})
    assert "not signed" in log.verify().problem


def test_truncating_the_log_and_its_head_together_is_found_by_the_signature() -> None:
    """Dropping the last entry and writing a head for the new last one needs the key."""
    log = filled()
    raw = log.path.read_text().splitlines()[:-1]
    log.path.write_text("".join(line + "\n" for line in raw))
    last = json.loads(raw[-1])
    set_head(log, {"seq": last["seq"], "hash": last["hash"], "mac": "f" * 64})
    assert "not signed" in log.verify().problem


def test_a_torn_last_line_fails_appends_until_repair_moves_it_aside() -> None:
    log = filled(3)
    with log.path.open("a") as handle:
        handle.write('{"seq": 3, "ts": 1.0, "kind": "tool_ca')  # a crash mid-write
    with pytest.raises(AuditError, match="chorus audit repair"):
        log.append("tool_call", {"i": 3})
    result = log.repair()
    assert result.repaired
    assert result.moved_to is not None
    assert result.moved_to.read_text().startswith('{"seq": 3')
    assert oct(result.moved_to.stat().st_mode & 0o777) == "0o600"
    entries = list(log.entries())
    assert entries[-1].kind == "audit_repair"
    assert entries[-1].data["moved_to"] == str(result.moved_to)
    assert log.verify().ok
    log.append("tool_call", {"i": 4})  # appends work again
    assert log.verify().ok


def test_repair_changes_nothing_when_the_last_line_is_whole() -> None:
    log = filled(2)
    before = log.path.read_bytes()
    assert not log.repair().repaired
    assert log.path.read_bytes() == before
