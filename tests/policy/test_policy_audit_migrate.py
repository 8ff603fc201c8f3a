"""an audit log written before entries were signed is checked, sealed by a
signed anchor (``chorus audit migrate``), and verifies from then on; its unsigned
prefix stays tamper-evident.

``LegacyAuditLog`` is the writer Chorus shipped before signing (``_audit.py`` at
commit 9bfa7f4, up to 15e9e71^), copied verbatim minus the lock and the event
mapping: entries without ``mac`` and an unsigned ``head.json``.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from chorus.cli._app import _register, app
from chorus.policy import AuditLog
from chorus.policy._audit import GENESIS, MIGRATION_KIND, audit_dir

_register()
runner = CliRunner()

# -- the pre-signing writer (verbatim from the old _audit.py) ----------------------------

_HASHED_FIELDS = ("seq", "ts", "kind", "session_id", "data", "prev")


def _canonical(fields: Mapping[str, Any]) -> bytes:
    return json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def legacy_entry_hash(fields: Mapping[str, Any]) -> str:
    return hashlib.sha256(_canonical({k: fields.get(k) for k in _HASHED_FIELDS})).hexdigest()


class LegacyAuditLog:
    def __init__(self, path: Path | None = None) -> None:
        self.path = path or audit_dir() / "audit.jsonl"

    @property
    def head_path(self) -> Path:
        return self.path.with_name("head.json")

    def append(
        self, kind: str, data: Mapping[str, Any] | None = None, *, session_id: str | None = None
    ) -> dict[str, Any]:
        clean = json.loads(json.dumps(dict(data or {}), default=str))
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        last = self._last_entry()
        fields: dict[str, Any] = {
            "seq": 0 if last is None else last["seq"] + 1,
            "ts": time.time(),
            "kind": kind,
            "session_id": session_id,
            "data": clean,
            "prev": GENESIS if last is None else last["hash"],
        }
        entry = {**fields, "hash": legacy_entry_hash(fields)}
        line = json.dumps(entry, ensure_ascii=False, separators=(",", ":")) + "\n"
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line.encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        self._write_head(entry)
        return entry

    def _write_head(self, entry: dict[str, Any]) -> None:
        tmp = self.head_path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"seq": entry["seq"], "hash": entry["hash"]}), encoding="utf-8")
        os.chmod(tmp, 0o600)
        os.replace(tmp, self.head_path)

    def _last_entry(self) -> dict[str, Any] | None:
        if not self.path.exists():
            return None
        lines = [ln for ln in self.path.read_text(encoding="utf-8").splitlines() if ln.strip()]
        return json.loads(lines[-1]) if lines else None


# -- helpers ---------------------------------------------------------------------------


def legacy_log(n: int = 4) -> LegacyAuditLog:
    old = LegacyAuditLog()
    for i in range(n):
        old.append("tool_call", {"tool": "shell", "i": i}, session_id="s-old")
    return old


def chorus(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.output


def rewrite(path: Path, index: int, change: dict[str, Any], *, relink: bool = False) -> None:
    """Edit line ``index``; with ``relink`` recompute its hash and every later
    unsigned entry's ``prev``/``hash`` (what a writer without the key can do)."""
    entries = [json.loads(ln) for ln in path.read_text().splitlines()]
    entries[index].update(change)
    if relink:
        for k in range(index, len(entries)):
            if "mac" in entries[k]:
                break
            if k > 0:
                entries[k]["prev"] = entries[k - 1]["hash"]
            entries[k]["hash"] = legacy_entry_hash(entries[k])
    path.write_text("".join(json.dumps(e, separators=(",", ":")) + "\n" for e in entries))


# -- the legacy log as it is -------------------------------------------------------------


def test_a_legacy_log_has_the_old_format_and_does_not_verify() -> None:
    old = legacy_log()
    first = json.loads(old.path.read_text().splitlines()[0])
    assert set(first) == {"seq", "ts", "kind", "session_id", "data", "prev", "hash"}
    assert set(json.loads(old.head_path.read_text())) == {"seq", "hash"}
    result = AuditLog().verify()
    assert (result.ok, result.needs_migration, result.legacy) == (False, True, 4)
    assert "chorus audit migrate" in result.problem


def test_migrate_seals_the_legacy_log_and_verify_passes() -> None:
    legacy_log(4)
    log = AuditLog()
    result = log.migrate()
    assert (result.status, result.legacy, result.anchor_seq) == ("migrated", 4, 4)
    anchor = list(log.entries())[-1]
    assert anchor.kind == MIGRATION_KIND
    assert anchor.data["legacy_entries"] == 4
    assert anchor.data["legacy_last_hash"] == list(log.entries())[3].hash
    assert len(anchor.mac) == 64
    verified = log.verify()
    assert (verified.ok, verified.entries, verified.legacy) == (True, 5, 4), verified
    log.append("tool_call", {"after": True})
    assert log.verify().ok


def test_signed_entries_appended_before_the_migration_are_kept() -> None:
    """An upgraded Chorus appends signed entries after the old ones before anyone migrates."""
    legacy_log(3)
    log = AuditLog()
    log.append("tool_call", {"new": 1})
    log.append("tool_call", {"new": 2})
    assert not log.verify().ok
    assert log.migrate().status == "migrated"
    verified = log.verify()
    assert (verified.ok, verified.entries, verified.legacy) == (True, 6, 3)


@pytest.mark.parametrize("relink", [False, True], ids=["edited", "edited-and-relinked"])
def test_tampering_with_the_legacy_prefix_after_the_anchor_is_found(relink: bool) -> None:
    legacy_log(4)
    log = AuditLog()
    assert log.migrate().migrated
    rewrite(log.path, 1, {"data": {"tool": "read", "i": 1}}, relink=relink)
    result = log.verify()
    assert not result.ok
    assert "altered" in result.problem or "does not follow" in result.problem, result.problem


def test_dropping_the_legacy_prefix_after_the_anchor_is_found() -> None:
    legacy_log(3)
    log = AuditLog()
    assert log.migrate().migrated
    lines = log.path.read_text().splitlines(keepends=True)
    log.path.write_text("".join(lines[3:]))
    assert not log.verify().ok


def test_stripping_a_signature_after_the_anchor_is_found() -> None:
    """A signed entry without its ``mac`` would look legacy: the anchor's count says no."""
    legacy_log(2)
    log = AuditLog()
    log.append("tool_call", {"new": 1})
    assert log.migrate().migrated
    entries = [json.loads(ln) for ln in log.path.read_text().splitlines()]
    del entries[2]["mac"]
    log.path.write_text("".join(json.dumps(e) + "\n" for e in entries))
    result = log.verify()
    assert (result.ok, result.needs_migration) == (False, False)
    assert "sealed by the migration" in result.problem


# -- what migrate refuses ----------------------------------------------------------------


def test_a_legacy_log_whose_own_chain_is_broken_is_not_migrated() -> None:
    old = legacy_log(4)
    rewrite(old.path, 2, {"kind": "edited"})
    before = old.path.read_bytes()
    result = AuditLog().migrate()
    assert result.status == "broken"
    assert "entry 2" in result.problem
    assert old.path.read_bytes() == before


def test_a_legacy_log_cut_short_of_its_head_is_not_migrated() -> None:
    old = legacy_log(4)
    lines = old.path.read_text().splitlines(keepends=True)
    old.path.write_text("".join(lines[:3]))
    result = AuditLog().migrate()
    assert result.status == "broken"
    assert "missing from the end" in result.problem


def test_a_legacy_log_without_its_head_is_not_migrated() -> None:
    old = legacy_log(2)
    old.head_path.unlink()
    result = AuditLog().migrate()
    assert (result.status, "missing" in result.problem) == ("broken", True)


def test_an_unsigned_entry_after_a_signed_one_is_not_legacy() -> None:
    log = AuditLog()
    log.append("tool_call", {"i": 0})
    LegacyAuditLog().append("tool_call", {"i": 1})
    assert log.migrate().status == "broken"
    assert "not signed" in log.verify().problem


def test_no_log_signed_log_and_second_migration_write_nothing() -> None:
    log = AuditLog()
    assert log.migrate().status == "no_log"
    assert not log.path.parent.exists()  # not even the audit folder
    log.append("tool_call", {"i": 0})
    assert log.migrate().status == "nothing_to_migrate"
    log.path.unlink()
    log.head_path.unlink()
    legacy_log(2)
    assert log.migrate().migrated
    size = log.path.stat().st_size
    again = log.migrate()
    assert (again.status, again.anchor_seq) == ("already_migrated", 2)
    assert log.path.stat().st_size == size


# -- the command ---------------------------------------------------------------------------


def test_chorus_audit_migrate_then_verify() -> None:
    legacy_log(3)
    code, out = chorus("audit", "verify")
    assert code == 1
    assert "UNSIGNED: entries 0..2 are not signed" in out
    assert "chorus audit migrate" in out
    code, out = chorus("audit", "migrate", "--json")
    assert code == 0, out
    report = json.loads(out)
    assert (report["migrated"], report["status"], report["legacy"]) == (True, "migrated", 3)
    assert report["anchor_seq"] == 3
    code, out = chorus("audit", "verify", "--json")
    assert code == 0, out
    assert json.loads(out)["legacy"] == 3
    code, out = chorus("audit", "verify")
    assert code == 0
    assert "the first 3 were written before signing" in out


def test_chorus_audit_migrate_bad_input_exits_2() -> None:
    code, out = chorus("audit", "migrate")
    assert code == 2
    assert "no audit log" in out
    legacy_log(1)
    assert chorus("audit", "migrate")[0] == 0
    code, out = chorus("audit", "migrate", "--json")
    assert code == 2
    assert json.loads(out)["status"] == "already_migrated"
    code, out = chorus("audit", "migrate")
    assert code == 2
    assert "already migrated" in out


def test_chorus_audit_migrate_refuses_a_broken_legacy_log_with_exit_1() -> None:
    old = legacy_log(3)
    rewrite(old.path, 0, {"session_id": "forged"})
    code, out = chorus("audit", "migrate")
    assert code == 1
    assert "not migrated" in out
    assert "nothing was written" in out
