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

A log written before signing (entries without ``mac``, an unsigned head) does
not verify until ``chorus audit migrate`` checks what it still can (the legacy
entries' own hash chain, and the head against the last of them) and seals it
with a signed ``audit_migration`` entry naming how many entries precede it
unsigned and the hash of the last one. From then on the unsigned prefix is
accepted only as that anchor describes it: editing it, even with every SHA-256
link recomputed, fails ``verify``.

The two files can still be deleted together, or both rolled back to an older
copy, and agree with each other. So an anchor outside them, in the store, records
how many entries the log held and the last one's hash (signed, moved forward after
appends: see :mod:`chorus.policy._anchor`); ``verify`` fails when the log holds
fewer entries than the anchor names, or another entry where it names one. A log
from before anchors is anchored by its first append or its first passing
``verify``.

A crash in the middle of an append can leave a torn last line; every later
append then refuses to chain after it until ``chorus audit repair`` moves the
line aside (into ``audit/torn-<time>.jsonl``) and logs that it did. Appends from several
processes are serialized with ``flock`` on ``audit/.lock``; the chain is read
back from the file under that lock, never from memory, so two writers cannot
fork it.

Kinds written by Chorus: ``tool_call``, ``permission_decision``,
``policy_denial``, ``flag_raised``, ``flag_answered``, ``control_request``,
``failover``, ``secret_set``, ``secret_removed``, ``audit_repair``,
``audit_migration``, ``audit_reanchor``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import hmac
import json
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chorus._errors import ChorusError
from chorus.config import chorus_home
from chorus.events import ControlRequestEvent, Event, Handoff, PermissionDecision, ToolCall
from chorus.policy._anchor import AnchorKeeper, Mark
from chorus.policy._errors import AuditError
from chorus.policy._redact import RedactorLike, default_redactor
from chorus.policy._secrets import KeySource, default_key_source
from chorus.store import AnchorCell, AuditAnchor, StoreError, audit_anchor_cell

GENESIS = "0" * 64
#: Strings in entry data longer than this are cut (a Write of a whole file is not audit material).
MAX_FIELD_CHARS = 4096
_HASHED_FIELDS = ("seq", "ts", "kind", "session_id", "data", "prev")
_ENTRY_FIELDS = frozenset({*_HASHED_FIELDS, "hash", "mac"})
_HEAD_FIELDS = frozenset({"seq", "hash", "mac"})
_KEY_LABEL = b"chorus audit chain v1"
#: The signed entry that seals a log written before signing.
MIGRATION_KIND = "audit_migration"
#: The signed entry a person's ``reanchor`` leaves: the anchor it replaced.
REANCHOR_KIND = "audit_reanchor"


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
    #: How many entries, written before signing, precede the migration anchor.
    legacy: int = 0
    #: The log starts with unsigned entries and no anchor: ``chorus audit migrate``.
    needs_migration: bool = False


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
    ``anchor`` is where the anchor lives: the configured store (``True``, made on
    first use), a given :class:`chorus.store.AnchorCell`, or nowhere (``False``).
    """

    def __init__(
        self,
        path: Path | None = None,
        *,
        redactor: RedactorLike | None = None,
        key: KeySource | None = None,
        anchor: AnchorCell | bool = True,
    ) -> None:
        self.path = path or audit_dir() / "audit.jsonl"
        self._redactor = redactor
        self._key_source = key
        self._key: bytes | None = None
        self._key_lock = threading.Lock()  # the warm-up's thread may load it too
        self.anchor = self._keeper(anchor)

    def _keeper(self, anchor: AnchorCell | bool) -> AnchorKeeper | None:
        if anchor is False:
            return None
        cell = audit_anchor_cell if anchor is True else (lambda: anchor)
        return AnchorKeeper(self.path, _store_cell(cell), self._mac, self._line_ending_at)

    def _mac(self, message: str) -> str:
        """HMAC-SHA256 of ``message`` under the audit key (derived from the vault key)."""
        if self._key is None:
            with self._key_lock:
                if self._key is None:
                    master = (self._key_source or default_key_source()).load_or_create()
                    self._key = hmac.new(master, _KEY_LABEL, hashlib.sha256).digest()
        return hmac.new(self._key, message.encode(), hashlib.sha256).hexdigest()

    def ready(self) -> None:
        """Load the key and the redactor now, so that the first append need not (the
        keyring's backend discovery alone takes a quarter of a second)."""
        self._mac("")
        _ = self.redactor

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
        with self._locked():
            return self._append_locked(kind, data, session_id)

    def _append_locked(
        self, kind: str, data: Mapping[str, Any] | None, session_id: str | None
    ) -> AuditEntry:
        clean = _cut(self.redactor.redact_json(_jsonable(dict(data or {}))))
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
        end = self._write_line(entry)
        self._write_head(entry)
        if self.anchor is not None:
            self.anchor.note(Mark(entry.seq + 1, entry.hash, end))
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

    def _write_line(self, entry: AuditEntry) -> int:
        """Append ``entry``'s line; returns the file's size after it (where it ends)."""
        line = json.dumps(entry.to_dict(), ensure_ascii=False, separators=(",", ":")) + "\n"
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, line.encode())  # one write: a reader never sees half a line
                os.fsync(fd)
                return os.lseek(fd, 0, os.SEEK_CUR)
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

    def _line_ending_at(self, offset: int) -> str | None:
        return _last_line(self.path, end=offset)

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
        for number, raw, _ in self._lines_at():
            yield number, raw

    def _lines_at(self) -> Iterator[tuple[int, str, int]]:
        """(1-based line number, text, byte offset just after the line) of each line."""
        if not self.path.exists():
            return
        end = 0
        with self.path.open("rb") as handle:
            for number, raw in enumerate(handle, start=1):
                end += len(raw)
                if raw.strip():
                    yield number, raw.decode("utf-8", "replace"), end

    def verify(self) -> VerifyResult:
        """Walk the chain and report the first entry that is altered, missing or moved.

        Checks, per line: valid JSON with exactly the known fields; ``seq`` is the
        next number (a gap means a deletion, a smaller or larger one a reordering);
        ``prev`` is the previous entry's hash; ``hash`` matches the content;
        ``mac`` is the hash signed with the audit key. At the end, the head must
        exist (for a non-empty log), be signed, and name the log's last entry.
        Unsigned entries (a log written before signing) pass only as the prefix a
        signed migration anchor seals; ``legacy`` says how many there are.
        """
        stored, unreadable = self._stored_anchor()
        walk = self._walk(watch=stored.entries - 1 if stored else None)
        if walk.problem:
            return VerifyResult(False, walk.count, walk.seq, walk.line, walk.problem)
        legacy = _legacy_problem(walk)
        if legacy:
            unsealed = walk.anchor is None
            return VerifyResult(False, walk.count, 0, 1, legacy, walk.legacy, unsealed)
        result = self._check_head(walk.count, walk.last_hash)
        result = dataclasses.replace(result, legacy=walk.legacy)
        if unreadable and result.ok:
            return dataclasses.replace(result, ok=False, problem=unreadable)
        return self._against_anchor(result, walk, stored)

    def _walk(self, watch: int | None = None) -> _Walk:
        """Read the chain; entries without ``mac`` are let through only before the first
        signed one (a log written before signing), for the caller to judge. The hash
        of entry ``watch`` is kept aside (the one the anchor names)."""
        walk = _Walk(watch=watch)
        for number, raw, end in self._lines_at():
            problem, entry = _check_line(raw, walk.count, walk.last_hash)
            if not problem and entry is not None:
                problem = self._signature_problem(entry, walk)
            if problem:
                walk.seq, walk.line, walk.problem = walk.count, number, problem
                return walk
            assert entry is not None
            walk.take(entry, end)
        return walk

    # -- the anchor in the store ---------------------------------------------------

    def _stored_anchor(self) -> tuple[AuditAnchor | None, str]:
        """The anchor (None: none, or anchors are off) or why it could not be read."""
        if self.anchor is None:
            return None, ""
        try:
            return self.anchor.load(), ""
        except StoreError as exc:
            return None, f"cannot read the audit anchor from the store: {exc}"

    def _against_anchor(
        self, result: VerifyResult, walk: _Walk, stored: AuditAnchor | None
    ) -> VerifyResult:
        """``result`` (a chain that passed its own checks) against the store's anchor;
        a log with no anchor yet is anchored where it stands now."""
        if not result.ok or self.anchor is None:
            return result
        if stored is None:
            self._adopt(walk)
            return result
        problem = _anchor_problem(stored, walk, self.path, self.anchor.signed(stored))
        if not problem:
            return result
        seq = min(walk.count, stored.entries - 1)
        return VerifyResult(False, walk.count, seq, None, problem, walk.legacy)

    def _adopt(self, walk: _Walk) -> None:
        if self.anchor is None or not walk.count:
            return
        with self._locked(), contextlib.suppress(StoreError):
            self.anchor.adopt(Mark(walk.count, walk.last_hash, walk.end_offset))

    def _signature_problem(self, entry: AuditEntry, walk: _Walk) -> str:
        if not entry.mac and walk.count == walk.legacy:
            return ""  # still in the unsigned prefix
        if not self._signed(entry):
            return f"entry {entry.seq} is not signed with this home's audit key"
        return ""

    def _signed(self, entry: AuditEntry) -> bool:
        return hmac.compare_digest(entry.mac, self._mac(entry.hash))

    def _check_head(self, count: int, last_hash: str) -> VerifyResult:
        head, problem = self._read_head(count)
        if problem:
            return VerifyResult(False, count, None, None, problem)
        if head is None:
            return VerifyResult(True, count)
        return _compare_head(head["seq"], head["hash"], count, last_hash)

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

    # -- a new log on purpose -------------------------------------------------------

    def reanchor(self) -> ReanchorResult:
        """Accept the log as it stands when a person replaced it on purpose (moved an old
        one aside): the log must pass its own checks; a signed ``audit_reanchor`` entry
        naming the anchor it replaces is appended, and the anchor moves to it."""
        if self.anchor is None:
            return ReanchorResult("off", "this audit log keeps no anchor")
        try:
            return self._reanchor(self.anchor)
        except StoreError as exc:
            return ReanchorResult("store_error", f"the store's audit anchor: {exc}")

    def _reanchor(self, keeper: AnchorKeeper) -> ReanchorResult:
        with self._locked():
            old = keeper.load()
            walk = self._walk(watch=old.entries - 1 if old else None)
            problem = walk.problem or _legacy_problem(walk)
            problem = problem or self._check_head(walk.count, walk.last_hash).problem
            if problem:
                return ReanchorResult("broken", problem)
            if old is None or not _anchor_problem(old, walk, self.path, keeper.signed(old)):
                return ReanchorResult("nothing_to_do", "the log already matches its anchor")
            data = {"replaced_entries": old.entries, "replaced_head": old.head_hash}
            entry = self._append_locked(REANCHOR_KIND, data, None)
            keeper.replace(Mark(entry.seq + 1, entry.hash, _size(self.path)), old.entries)
        return ReanchorResult("reanchored", "", old.entries, entry.seq + 1)

    # -- migration -----------------------------------------------------------------

    def migrate(self) -> MigrateResult:
        """Seal a log written before signing with a signed ``audit_migration`` entry.

        The unsigned prefix is checked first for what it can be: its SHA-256 chain,
        and an unsigned head must name its last entry (a signed head, the log's).
        Nothing is written unless the whole log passes and has an unsigned prefix.
        """
        if not any(True for _ in self._lines()):  # before the lock, which makes the folder
            return MigrateResult("no_log", f"no audit log at {self.path}: nothing to migrate")
        with self._locked():
            walk = self._walk()
            refusal = self._migration_refusal(walk)
            if refusal is not None:
                return refusal
            anchor = self._append_locked(MIGRATION_KIND, _anchor_data(walk), None)
        return MigrateResult("migrated", "", walk.legacy, anchor.seq)

    def _migration_refusal(self, walk: _Walk) -> MigrateResult | None:
        if walk.problem:
            where = f"entry {walk.seq} (line {walk.line})"
            return MigrateResult("broken", f"{where}: {walk.problem}", walk.legacy)
        if walk.anchor is not None:
            why = f"already migrated: entry {walk.anchor.seq} seals {walk.legacy} legacy entries"
            return MigrateResult("already_migrated", why, walk.legacy, walk.anchor.seq)
        if not walk.legacy:
            return MigrateResult("nothing_to_migrate", "every entry is signed: nothing to migrate")
        head = self._legacy_head_problem(walk)
        return None if not head else MigrateResult("broken", head, walk.legacy)

    def _legacy_head_problem(self, walk: _Walk) -> str:
        """The head before sealing: unsigned (the old format) it must still name the
        log's last entry; signed, every check ``verify`` makes applies."""
        try:
            head = json.loads(self.head_path.read_text(encoding="utf-8"))
        except (FileNotFoundError, ValueError):
            head = None
        if not isinstance(head, dict) or "mac" in head:
            return self._check_head(walk.count, walk.last_hash).problem
        problem = _head_problem({**head, "mac": ""})
        if problem:
            return problem
        return _compare_head(head["seq"], head["hash"], walk.count, walk.last_hash).problem


@dataclass(frozen=True, slots=True)
class ReanchorResult:
    """What ``reanchor`` did. ``status``: ``reanchored``, ``nothing_to_do``, ``broken``
    (the log fails its own checks: nothing written), ``store_error`` or ``off`` (no
    anchor kept)."""

    status: str
    problem: str = ""
    replaced: int | None = None
    entries: int = 0


def _size(path: Path) -> int:
    return path.stat().st_size


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


def _compare_head(head_seq: int, head_hash: Any, count: int, last_hash: str) -> VerifyResult:
    """Does the head name the log's last entry (``count - 1``, ``last_hash``)?"""
    last_seq = count - 1
    if head_seq > last_seq:
        missing = f"entries {last_seq + 1}..{head_seq} are missing from the end of the log"
        return VerifyResult(False, count, last_seq + 1, count + 1, missing)
    if head_seq < last_seq:
        late = f"the head names entry {head_seq} but the log goes on to {last_seq}"
        return VerifyResult(False, count, head_seq + 1, head_seq + 2, late)
    if head_hash != last_hash:
        return VerifyResult(False, count, last_seq, count, f"entry {last_seq} was altered")
    return VerifyResult(True, count)


@dataclass(slots=True)
class _Walk:
    """What reading the chain found: counts, the last hashes, the migration anchor,
    and the first problem (with its ``seq`` and 1-based ``line``)."""

    count: int = 0
    legacy: int = 0
    last_hash: str = GENESIS
    legacy_hash: str = GENESIS
    anchor: AuditEntry | None = None
    seq: int | None = None
    line: int | None = None
    problem: str = ""
    #: The entry whose hash to keep (the store's anchor names it), and that hash.
    watch: int | None = None
    watched_hash: str | None = None
    #: The byte offset just after the last entry read.
    end_offset: int = 0

    def take(self, entry: AuditEntry, end: int = 0) -> None:
        if not entry.mac:
            self.legacy, self.legacy_hash = self.legacy + 1, entry.hash
        elif entry.kind == MIGRATION_KIND and self.anchor is None:
            self.anchor = entry
        if entry.seq == self.watch:
            self.watched_hash = entry.hash
        self.count, self.last_hash, self.end_offset = self.count + 1, entry.hash, end


_ON_PURPOSE = "; if a person replaced it on purpose, `chorus audit repair --reanchor` accepts it"


def _anchor_problem(stored: AuditAnchor, walk: _Walk, path: Path, signed: bool) -> str:
    """Why the log is not the one the store's anchor describes (``""``: it is)."""
    n = stored.entries
    if not signed:
        return "the store's audit anchor for this log is not signed with this home's audit key"
    if walk.count == 0 and n:
        return (
            f"{path} is missing or empty, but the store's audit anchor says it held {n} "
            f"entries: the log was deleted{_ON_PURPOSE}"
        )
    if walk.count < n:
        return (
            f"the log holds {walk.count} entries, but the store's audit anchor says it held "
            f"{n} (up to entry {n - 1}, hash {stored.head_hash[:12]}...): entries were "
            f"removed, or the log and its head were rolled back to an older copy{_ON_PURPOSE}"
        )
    if walk.watched_hash != stored.head_hash:
        return (
            f"entry {n - 1} is not the one the store's audit anchor names (hash "
            f"{stored.head_hash[:12]}...): the log was replaced{_ON_PURPOSE}"
        )
    return ""


def _store_cell(make: Callable[[], AnchorCell]) -> Callable[[], AnchorCell]:
    """``make``, with a config that cannot be read reported as a store problem."""

    def cell() -> AnchorCell:
        try:
            return make()
        except ChorusError as exc:
            raise StoreError(f"cannot open the store: {exc}") from exc

    return cell


def _anchor_data(walk: _Walk) -> dict[str, Any]:
    return {
        "legacy_entries": walk.legacy,
        "legacy_last_seq": walk.legacy - 1,
        "legacy_last_hash": walk.legacy_hash,
        "entries_before": walk.count,
    }


def _legacy_problem(walk: _Walk) -> str:
    """Unsigned entries must be exactly those the (signed) migration anchor seals."""
    if walk.anchor is None:
        if not walk.legacy:
            return ""
        return (
            f"entries 0..{walk.legacy - 1} are not signed (written before audit entries "
            "were signed, or their signatures were removed); `chorus audit migrate` checks "
            "and seals a log written before signing"
        )
    sealed = walk.anchor.data
    if (sealed.get("legacy_entries"), sealed.get("legacy_last_hash")) != (
        walk.legacy,
        walk.legacy_hash,
    ):
        return (
            f"the {sealed.get('legacy_entries')} entries sealed by the migration at entry "
            f"{walk.anchor.seq} were altered (the log now has {walk.legacy} unsigned entries "
            "or a different last hash)"
        )
    return ""


@dataclass(frozen=True, slots=True)
class MigrateResult:
    """What ``migrate`` did. ``status``: ``migrated``, ``no_log``, ``nothing_to_migrate``,
    ``already_migrated`` or ``broken`` (the legacy chain or head fails its own checks)."""

    status: str
    problem: str = ""
    legacy: int = 0
    anchor_seq: int | None = None

    @property
    def migrated(self) -> bool:
        return self.status == "migrated"


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


def _last_line(path: Path, chunk: int = 65536, *, end: int | None = None) -> str | None:
    """The last non-empty line of ``path`` (read backwards), or ``None``; with ``end``,
    the last one that ends at or before that byte offset."""
    try:
        handle = path.open("rb")
    except FileNotFoundError:
        return None
    with handle:
        handle.seek(0, os.SEEK_END)
        end = handle.tell() if end is None else min(end, handle.tell())
        buffer = b""
        while end > 0:
            start = max(0, end - chunk)
            handle.seek(start)
            buffer = handle.read(end - start) + buffer
            end = start
            lines = [ln for ln in buffer.split(b"\n") if ln.strip()]
            if len(lines) >= 2 or (lines and end == 0):
                return lines[-1].decode("utf-8", "replace")
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
