"""The audit log: an append-only hash chain at ``CHORUS_HOME/audit/audit.jsonl``.

One JSON object per line: ``seq`` (0, 1, 2 ... with no gap), ``ts``, ``kind``,
``session_id``, ``data``, ``prev`` (the previous entry's hash, 64 zeros for the
first) and ``hash`` = SHA-256 of the canonical JSON of every other field. Data
is redacted (and long strings cut) *before* hashing, so the chain verifies over
exactly what is on disk and no secret is ever part of it.

``audit/head.json`` records the last ``seq`` and ``hash`` after every append,
so removing entries from the end is detected too. Appends from several
processes are serialized with ``flock`` on ``audit/.lock``; the chain is read
back from the file under that lock, never from memory, so two writers cannot
fork it.

Kinds written by Chorus: ``tool_call``, ``permission_decision``,
``policy_denial``, ``flag_raised``, ``flag_answered``, ``control_request``,
``failover``, ``secret_set``, ``secret_removed``.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chorus.config import chorus_home
from chorus.events import ControlRequestEvent, Event, Handoff, PermissionDecision, ToolCall
from chorus.policy._errors import AuditError
from chorus.policy._redact import RedactorLike, default_redactor

GENESIS = "0" * 64
#: Strings in entry data longer than this are cut (a Write of a whole file is not audit material).
MAX_FIELD_CHARS = 4096
_HASHED_FIELDS = ("seq", "ts", "kind", "session_id", "data", "prev")


def audit_dir() -> Path:
    """``CHORUS_HOME/audit`` (not created)."""
    return chorus_home() / "audit"


def _canonical(fields: Mapping[str, Any]) -> bytes:
    return json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def entry_hash(fields: Mapping[str, Any]) -> str:
    """SHA-256 over the canonical JSON of the hashed fields (``prev`` included)."""
    return hashlib.sha256(_canonical({k: fields.get(k) for k in _HASHED_FIELDS})).hexdigest()


@dataclass(frozen=True, slots=True)
class AuditEntry:
    """One line of the log."""

    seq: int
    ts: float
    kind: str
    session_id: str | None
    data: dict[str, Any]
    prev: str
    hash: str

    def to_dict(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in (*_HASHED_FIELDS, "hash")}

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> AuditEntry:
        return cls(
            seq=int(raw["seq"]),
            ts=float(raw["ts"]),
            kind=str(raw["kind"]),
            session_id=raw.get("session_id"),
            data=dict(raw.get("data") or {}),
            prev=str(raw["prev"]),
            hash=str(raw["hash"]),
        )


@dataclass(frozen=True, slots=True)
class VerifyResult:
    """``ok``, how many entries were read, and the first problem if any.

    ``seq`` is the sequence number of the first bad (or missing) entry and
    ``line`` its 1-based line in the file.
    """

    ok: bool
    entries: int
    seq: int | None = None
    line: int | None = None
    problem: str = ""


def _cut(value: Any) -> Any:
    if isinstance(value, str) and len(value) > MAX_FIELD_CHARS:
        return value[:MAX_FIELD_CHARS] + f"...[{len(value) - MAX_FIELD_CHARS} more chars]"
    if isinstance(value, dict):
        return {k: _cut(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_cut(v) for v in value]
    return value


class AuditLog:
    """Append and verify the hash chain. Safe to use from several processes.

    ``redactor`` defaults to :func:`default_redactor` (the store's, with config
    patterns and built-in key formats), made on the first append; pass the
    daemon's redactor, with the vault's secrets registered, to share it.
    """

    def __init__(self, path: Path | None = None, *, redactor: RedactorLike | None = None) -> None:
        self.path = path or audit_dir() / "audit.jsonl"
        self._redactor = redactor

    @property
    def redactor(self) -> RedactorLike:
        if self._redactor is None:
            self._redactor = default_redactor()
        return self._redactor

    @property
    def head_path(self) -> Path:
        return self.path.with_name("head.json")

    # -- writing -------------------------------------------------------------------

    def append(
        self, kind: str, data: Mapping[str, Any] | None = None, *, session_id: str | None = None
    ) -> AuditEntry:
        """Redact ``data``, chain it after the last entry, and append it durably."""
        clean = _cut(self.redactor.redact_json(_jsonable(dict(data or {}))))
        with self._locked():
            last = self._last_entry()
            fields: dict[str, Any] = {
                "seq": 0 if last is None else last.seq + 1,
                "ts": time.time(),
                "kind": kind,
                "session_id": session_id,
                "data": clean,
                "prev": GENESIS if last is None else last.hash,
            }
            entry = AuditEntry(**fields, hash=entry_hash(fields))
            self._write_line(entry)
            self._write_head(entry)
        return entry

    def record_event(self, event: Event) -> AuditEntry | None:
        """Audit a canonical event if it is one the log keeps (tool calls, permission
        decisions, control requests, failovers); return ``None`` for the rest."""
        mapped = _event_entry(event)
        if mapped is None:
            return None
        kind, data = mapped
        return self.append(kind, data, session_id=event.session_id or None)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(self.path.with_name(".lock"), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing releases the lock

    def _write_line(self, entry: AuditEntry) -> None:
        line = json.dumps(entry.to_dict(), ensure_ascii=False, separators=(",", ":")) + "\n"
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, line.encode())  # one write: a reader never sees half a line
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            raise AuditError(f"{self.path}: cannot append: {exc}") from exc

    def _write_head(self, entry: AuditEntry) -> None:
        tmp = self.head_path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"seq": entry.seq, "hash": entry.hash}), encoding="utf-8")
        os.chmod(tmp, 0o600)
        os.replace(tmp, self.head_path)

    def _last_entry(self) -> AuditEntry | None:
        line = _last_line(self.path)
        if line is None:
            return None
        try:
            return AuditEntry.from_dict(json.loads(line))
        except (ValueError, KeyError, TypeError) as exc:
            raise AuditError(
                f"{self.path}: last entry is corrupt; run `chorus audit verify`"
            ) from exc

    # -- reading -------------------------------------------------------------------

    def entries(self, *, since: float | None = None) -> Iterator[AuditEntry]:
        """Entries in file order (optionally only those at or after ``since``).
        A corrupt line raises :class:`AuditError`; :meth:`verify` says which."""
        for number, raw in self._lines():
            try:
                entry = AuditEntry.from_dict(json.loads(raw))
            except (ValueError, KeyError, TypeError) as exc:
                raise AuditError(f"{self.path}:{number}: not an audit entry") from exc
            if since is None or entry.ts >= since:
                yield entry

    def _lines(self) -> Iterator[tuple[int, str]]:
        if not self.path.exists():
            return
        with self.path.open(encoding="utf-8") as handle:
            for number, raw in enumerate(handle, start=1):
                if raw.strip():
                    yield number, raw

    def verify(self) -> VerifyResult:
        """Walk the chain and report the first entry that is altered, missing or moved.

        Checks, per line: valid JSON with every field; ``seq`` is the next number
        (a gap means a deletion, a smaller or larger one a reordering); ``prev``
        is the previous entry's hash; ``hash`` matches the content. At the end,
        the head file must not record more than the log holds.
        """
        expected_seq, prev, count = 0, GENESIS, 0
        for number, raw in self._lines():
            problem, entry = _check_line(raw, expected_seq, prev)
            if problem:
                return VerifyResult(False, count, expected_seq, number, problem)
            assert entry is not None
            expected_seq, prev, count = entry.seq + 1, entry.hash, count + 1
        return self._check_head(count, expected_seq - 1, prev)

    def _check_head(self, count: int, last_seq: int, last_hash: str) -> VerifyResult:
        try:
            head = json.loads(self.head_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return VerifyResult(True, count)
        except ValueError:
            return VerifyResult(False, count, None, None, f"{self.head_path} is corrupt")
        head_seq, head_hash = head.get("seq"), head.get("hash")
        if isinstance(head_seq, int) and head_seq > last_seq:
            return VerifyResult(
                False,
                count,
                last_seq + 1,
                count + 1,
                f"entries {last_seq + 1}..{head_seq} are missing from the end of the log",
            )
        if head_seq == last_seq and head_hash != last_hash:
            return VerifyResult(False, count, last_seq, count, f"entry {last_seq} was altered")
        return VerifyResult(True, count)


def _check_line(raw: str, expected_seq: int, prev: str) -> tuple[str, AuditEntry | None]:
    """The problem with one line (``""`` if none) and the parsed entry."""
    try:
        decoded = json.loads(raw)
        entry = AuditEntry.from_dict(decoded)
    except (ValueError, KeyError, TypeError):
        return f"entry {expected_seq} is not valid JSON or lacks a field", None
    if entry.seq != expected_seq:
        if entry.seq > expected_seq:
            return f"entry {expected_seq} is missing (found entry {entry.seq} in its place)", None
        return f"entry {entry.seq} is out of order (expected entry {expected_seq})", None
    if entry.prev != prev:
        return f"entry {entry.seq} does not follow entry {entry.seq - 1} (prev hash differs)", None
    if entry_hash(decoded) != entry.hash:
        return f"entry {entry.seq} was altered (its hash does not match its content)", None
    return "", entry


def _last_line(path: Path, chunk: int = 65536) -> str | None:
    """The last non-empty line of ``path`` (read backwards), or ``None``."""
    try:
        handle = path.open("rb")
    except FileNotFoundError:
        return None
    with handle:
        handle.seek(0, os.SEEK_END)
        end = handle.tell()
        buffer = b""
        while end > 0:
            start = max(0, end - chunk)
            handle.seek(start)
            buffer = handle.read(end - start) + buffer
            end = start
            lines = [ln for ln in buffer.split(b"\n") if ln.strip()]
            if len(lines) >= 2 or (lines and end == 0):
                return lines[-1].decode("utf-8")
        return None


def _jsonable(value: Any) -> Any:
    """Round-trip through JSON so tuples, paths and the like hash the same after reading."""
    return json.loads(json.dumps(value, default=str))


def _event_entry(event: Event) -> tuple[str, dict[str, Any]] | None:
    base = {"body": event.body}
    if isinstance(event, ToolCall):
        return "tool_call", {
            **base,
            "call_id": event.call_id,
            "tool": event.tool,
            "native_tool": event.native_tool,
            "input": event.input,
        }
    if isinstance(event, PermissionDecision):
        return "permission_decision", {
            **base,
            "request_id": event.request_id,
            "decision": event.decision,
            "reason": event.reason,
            "source": event.source,
        }
    if isinstance(event, ControlRequestEvent):
        return "control_request", {
            **base,
            "request_id": event.request_id,
            "subtype": event.subtype,
            "payload": event.payload,
        }
    if isinstance(event, Handoff):
        return "failover", {
            **base,
            "from_body": event.from_body,
            "to_body": event.to_body,
            "reason": event.reason.model_dump(mode="json"),
        }
    return None
