"""The audit hash chain: append, verify, and find the first altered, missing or moved entry."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from chorus.events import (
    ControlRequestEvent,
    ErrorCode,
    ErrorInfo,
    Handoff,
    PermissionDecision,
    Text,
    ToolCall,
)
from chorus.policy import AuditError, AuditLog
from chorus.policy._audit import GENESIS, entry_hash
from chorus.store import Redactor


def filled(n: int = 5) -> AuditLog:
    log = AuditLog()
    for i in range(n):
        log.append("tool_call", {"i": i, "tool": "shell"}, session_id="s")
    return log


def lines(log: AuditLog) -> list[str]:
    return log.path.read_text().splitlines()


def rewrite(log: AuditLog, new: list[str]) -> None:
    log.path.write_text("".join(line + "\n" for line in new))


def test_entries_chain_from_genesis() -> None:
    log = filled(3)
    entries = list(log.entries())
    assert [e.seq for e in entries] == [0, 1, 2]
    assert entries[0].prev == GENESIS
    assert entries[1].prev == entries[0].hash
    assert all(entry_hash(e.to_dict()) == e.hash for e in entries)
    result = log.verify()
    assert (result.ok, result.entries) == (True, 3)
    assert log.path == log.path.parent / "audit.jsonl"
    assert oct(os.stat(log.path).st_mode & 0o777) == "0o600"


def test_an_empty_log_verifies() -> None:
    assert AuditLog().verify().ok


def test_altering_one_field_is_found_and_named() -> None:
    log = filled()
    raw = lines(log)
    entry = json.loads(raw[2])
    entry["data"]["tool"] = "read"
    raw[2] = json.dumps(entry)
    rewrite(log, raw)
    result = log.verify()
    assert not result.ok
    assert (result.seq, result.line) == (2, 3)
    assert "entry 2 was altered" in result.problem


def test_altering_a_hash_to_match_fails_its_signature() -> None:
    """Recomputing the SHA-256 is not enough: the entry's HMAC needs the vault key."""
    log = filled()
    raw = lines(log)
    entry = json.loads(raw[1])
    entry["kind"] = "nothing_to_see"
    entry["hash"] = entry_hash(entry)
    raw[1] = json.dumps(entry)
    rewrite(log, raw)
    result = log.verify()
    assert result.seq == 1
    assert "not signed" in result.problem


def test_deleting_an_entry_is_found() -> None:
    log = filled()
    raw = lines(log)
    del raw[3]
    rewrite(log, raw)
    result = log.verify()
    assert (result.ok, result.seq, result.line) == (False, 3, 4)
    assert "entry 3 is missing" in result.problem


def test_deleting_the_last_entries_is_found_through_the_head() -> None:
    log = filled()
    rewrite(log, lines(log)[:3])
    result = log.verify()
    assert not result.ok
    assert result.seq == 3
    assert "missing from the end" in result.problem


def test_reordering_is_found() -> None:
    log = filled()
    raw = lines(log)
    raw[1], raw[2] = raw[2], raw[1]
    rewrite(log, raw)
    result = log.verify()
    assert (result.ok, result.seq, result.line) == (False, 1, 2)


def test_a_corrupt_line_is_found() -> None:
    log = filled()
    raw = lines(log)
    raw[4] = raw[4][:20]
    rewrite(log, raw)
    result = log.verify()
    assert (result.seq, result.line) == (4, 5)
    with pytest.raises(AuditError):
        list(log.entries())


def test_data_is_redacted_before_hashing() -> None:
    redactor = Redactor()
    redactor.add_secret("hunter2-secret-value")
    log = AuditLog(redactor=redactor)
    entry = log.append("tool_call", {"input": {"command": "echo hunter2-secret-value"}})
    assert "hunter2-secret-value" not in log.path.read_text()
    assert entry.data["input"]["command"] == "echo [REDACTED:secret]"
    assert log.verify().ok


def test_long_fields_are_cut() -> None:
    entry = AuditLog().append("tool_call", {"content": "x" * 10_000})
    assert len(entry.data["content"]) < 4200
    assert entry.data["content"].endswith("more chars]")


def test_since_filters_by_time() -> None:
    log = filled(2)
    cut = list(log.entries())[-1].ts + 0.001
    while time.time() <= cut:  # appends can come faster than the cut's millisecond
        time.sleep(0.001)
    log.append("late", {})
    assert [e.kind for e in log.entries(since=cut)] == ["late"]


def test_record_event_keeps_calls_decisions_controls_and_failovers() -> None:
    log = AuditLog()
    error = ErrorInfo(code=ErrorCode.QUOTA_EXHAUSTED, message="quota")
    events = [
        ToolCall(call_id="c", tool="shell", native_tool="Bash", input={"command": "ls"}),
        PermissionDecision(request_id="r", decision="deny", reason="no"),
        ControlRequestEvent(request_id="q", subtype="interrupt"),
        Handoff(from_body="claude", to_body="codex", reason=error),
        Text(text="not audited"),
    ]
    recorded = [log.record_event(e) for e in events]
    assert recorded[-1] is None
    assert [e.kind for e in log.entries()] == [
        "tool_call",
        "permission_decision",
        "control_request",
        "failover",
    ]
    assert log.verify().ok


_APPENDER = """
import os, sys
from chorus.policy import AuditLog
log = AuditLog()
for i in range(int(sys.argv[1])):
    log.append("tool_call", {"pid": os.getpid(), "i": i})
"""


def test_concurrent_appenders_never_fork_the_chain(chorus_home: Path) -> None:
    env = {**os.environ, "CHORUS_HOME": str(chorus_home)}
    workers = [subprocess.Popen([sys.executable, "-c", _APPENDER, "25"], env=env) for _ in range(4)]
    assert [w.wait(60) for w in workers] == [0] * 4
    result = AuditLog().verify()
    assert (result.ok, result.entries) == (True, 100)


def test_the_default_redactor_also_knows_key_formats() -> None:
    entry = AuditLog().append(
        "tool_call", {"command": "export OPENAI_API_KEY=sk-proj-abcdefghijklmnopqrstuvwxyz012345"}
    )
    assert "sk-proj-abcdef" not in json.dumps(entry.data)
    assert "REDACTED" in entry.data["command"]
