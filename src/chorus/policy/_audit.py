"""The audit log: an append-only hash chain at ``CHORUS_HOME/audit/audit.jsonl``.

One JSON object per line: ``seq`` (0, 1, 2 ... with no gap), ``ts``, ``kind``,
``session_id``, ``data``, ``prev`` (the previous entry's hash, 64 zeros for the
first) and ``hash`` = SHA-256 of the canonical JSON of every other field. Data
is redacted (and long strings cut) *before* hashing, so the chain verifies over
exactly what is on disk and no secret is ever part of it.

Each entry also carries ``mac``: an HMAC-SHA256 of its hash under a key derived
from the secrets vault's master key (the OS keyring, or ``secrets/master.key``),
so a writer who can edit the file but not read the key cannot forge a chain.

``audit/head.json`` records the last ``seq`` and ``hash`` (signed too) after
every append, so removing entries from the end is detected. A missing head with
a non-empty log, a head older than the log, a head whose ``seq`` is not an
integer and unknown fields in an entry or the head are tampering. Bodies never
see either file: the sandbox hides ``CHORUS_HOME`` from them.

A crash in the middle of an append can leave a torn last line; every later
append then refuses to chain after it until ``chorus audit repair`` moves the
line aside (into ``audit/torn-<time>.jsonl``) and logs that it did. Appends from several
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
import hmac
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
from chorus.policy._secrets import KeySource, default_key_source

GENESIS = "0" * 64
#: Strings in entry data longer than this are cut (a Write of a whole file is not audit material).
MAX_FIELD_CHARS = 4096
_HASHED_FIELDS = ("seq", "ts", "kind", "session_id", "data", "prev")
_ENTRY_FIELDS = frozenset({*_HASHED_FIELDS, "hash", "mac"})
_HEAD_FIELDS = frozenset({"seq", "hash", "mac"})
_KEY_LABEL = b"chorus audit chain v1"


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
    mac: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in (*_HASHED_FIELDS, "hash", "mac")}

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
            mac=str(raw.get("mac") or ""),
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

    def __init__(
        self,
        path: Path | None = None,
        *,
        redactor: RedactorLike | None = None,
        key: KeySource | None = None,
    ) -> None:
        self.path = path or audit_dir() / "audit.jsonl"
        self._redactor = redactor
        self._key_source = key
        self._key: bytes | None = None

    def _mac(self, message: str) -> str:
        """HMAC-SHA256 of ``message`` under the audit key (derived from the vault key)."""
        if self._key is None:
            master = (self._key_source or default_key_source()).load_or_create()
            self._key = hmac.new(master, _KEY_LABEL, hashlib.sha256).digest()
        return hmac.new(self._key, message.encode(), hashlib.sha256).hexdigest()

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
            digest = entry_hash(fields)
            entry = AuditEntry(**fields, hash=digest, mac=self._mac(digest))
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
        head = {"seq": entry.seq, "hash": entry.hash, "mac": self._head_mac(entry.seq, entry.hash)}
        tmp.write_text(json.dumps(head), encoding="utf-8")
        os.chmod(tmp, 0o600)
        os.replace(tmp, self.head_path)

    def _head_mac(self, seq: int, digest: str) -> str:
        return self._mac(f"head:{seq}:{digest}")

    def _last_entry(self) -> AuditEntry | None:
        line = _last_line(self.path)
        if line is None:
            return None
        try:
            return AuditEntry.from_dict(json.loads(line))
        except (ValueError, KeyError, TypeError) as exc:
            raise AuditError(
                f"{self.path}: the last entry is torn or corrupt; `chorus audit repair` "
                "moves it aside (then `chorus audit verify`)"
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

        Checks, per line: valid JSON with exactly the known fields; ``seq`` is the
        next number (a gap means a deletion, a smaller or larger one a reordering);
        ``prev`` is the previous entry's hash; ``hash`` matches the content;
        ``mac`` is the hash signed with the audit key. At the end, the head must
        exist (for a non-empty log), be signed, and name the log's last entry.
        """
        expected_seq, prev, count = 0, GENESIS, 0
        for number, raw in self._lines():
            problem, entry = _check_line(raw, expected_seq, prev)
            if not problem and entry is not None and not self._signed(entry):
                problem = f"entry {entry.seq} is not signed with this home's audit key"
            if problem:
                return VerifyResult(False, count, expected_seq, number, problem)
            assert entry is not None
            expected_seq, prev, count = entry.seq + 1, entry.hash, count + 1
        return self._check_head(count, expected_seq - 1, prev)

    def _signed(self, entry: AuditEntry) -> bool:
        return hmac.compare_digest(entry.mac, self._mac(entry.hash))

    def _check_head(self, count: int, last_seq: int, last_hash: str) -> VerifyResult:
        head, problem = self._read_head(count)
        if problem:
            return VerifyResult(False, count, None, None, problem)
        if head is None:
            return VerifyResult(True, count)
        head_seq, head_hash = head["seq"], head["hash"]
        if head_seq > last_seq:
            missing = f"entries {last_seq + 1}..{head_seq} are missing from the end of the log"
            return VerifyResult(False, count, last_seq + 1, count + 1, missing)
        if head_seq < last_seq:
            late = f"the head names entry {head_seq} but the log goes on to {last_seq}"
            return VerifyResult(False, count, head_seq + 1, head_seq + 2, late)
        if head_hash != last_hash:
            return VerifyResult(False, count, last_seq, count, f"entry {last_seq} was altered")
        return VerifyResult(True, count)

    def _read_head(self, count: int) -> tuple[dict[str, Any] | None, str]:
        """The head (None if absent from an empty log) or why it is not trustworthy."""
        try:
            head = json.loads(self.head_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            missing = f"{self.head_path} is missing but the log holds {count} entries"
            return None, missing if count else ""
        except ValueError:
            return None, f"{self.head_path} is corrupt"
        problem = _head_problem(head)
        if not problem and not hmac.compare_digest(
            str(head["mac"]), self._head_mac(head["seq"], str(head["hash"]))
        ):
            problem = f"{self.head_path} is not signed with this home's audit key"
        return (None, problem) if problem else (head, "")

    # -- repair --------------------------------------------------------------------

    def repair(self) -> RepairResult:
        """Move a torn last line aside (into ``torn-<time>.jsonl``) and log that it did.
        Nothing else is changed: any other problem is left for a person to see."""
        with self._locked():
            torn = _torn_tail(self.path)
            if torn is None:
                return RepairResult(False, None, 0)
            aside = self.path.with_name(f"torn-{time.strftime('%Y%m%dT%H%M%S')}.jsonl")
            _move_tail(self.path, torn, aside)
        self.append("audit_repair", {"moved_to": str(aside), "bytes": torn[1]})
        return RepairResult(True, aside, torn[1])


@dataclass(frozen=True, slots=True)
class RepairResult:
    """What ``repair`` did: whether it moved a torn line, where to, and its size."""

    repaired: bool
    moved_to: Path | None
    bytes: int


def _torn_tail(path: Path) -> tuple[int, int] | None:
    """``(offset, size)`` of a last line that is not a whole entry, else None."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    body = data.rstrip(b"\n")
    start = body.rfind(b"\n") + 1
    last = body[start:]
    if not last.strip():
        return None
    try:
        AuditEntry.from_dict(json.loads(last))
    except (ValueError, KeyError, TypeError):
        return start, len(data) - start
    return None


def _move_tail(path: Path, torn: tuple[int, int], aside: Path) -> None:
    offset, _ = torn
    with path.open("r+b") as handle:
        handle.seek(offset)
        tail = handle.read()
        fd = os.open(aside, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(tail)
        handle.truncate(offset)
        os.fsync(handle.fileno())


def _head_problem(head: Any) -> str:
    if not isinstance(head, dict):
        return "the head is not a JSON object"
    unknown = sorted(set(head) - _HEAD_FIELDS)
    if unknown:
        return f"the head has unknown fields: {', '.join(unknown)}"
    seq = head.get("seq")
    if not isinstance(seq, int) or isinstance(seq, bool) or seq < 0:
        return f"the head's seq is not a non-negative integer: {seq!r}"
    if not isinstance(head.get("hash"), str) or not isinstance(head.get("mac"), str):
        return "the head lacks its hash or signature"
    return ""


def _check_line(raw: str, expected_seq: int, prev: str) -> tuple[str, AuditEntry | None]:
    """The problem with one line (``""`` if none) and the parsed entry."""
    try:
        decoded = json.loads(raw)
        entry = AuditEntry.from_dict(decoded)
    except (ValueError, KeyError, TypeError):
        return f"entry {expected_seq} is not valid JSON or lacks a field", None
    unknown = sorted(set(decoded) - _ENTRY_FIELDS)
    if unknown:
        return f"entry {expected_seq} has unknown fields: {', '.join(unknown)}", None
    if entry.seq != expected_seq or not isinstance(decoded["seq"], int):
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
