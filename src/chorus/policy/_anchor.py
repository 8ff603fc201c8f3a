"""Keeping the store's audit anchor in step with one audit log.

The log's own two files can be deleted, or both rolled back to an older copy, and
still agree with each other. The anchor (:class:`chorus.store.AuditAnchor`: entry
count, last hash and the byte offset after that entry, signed with the audit key)
lives in the store instead, so :meth:`chorus.policy.AuditLog.verify` can tell.

Appends are hot (every tool call), so they only :meth:`AnchorKeeper.note` where the
log now ends; one background thread saves the latest note of each log shortly
after (a burst of appends is one store write), and whatever is pending is saved
when the process exits and before every ``verify``. The anchor only ever moves
forward along the chain it names: before saving, the stored anchor must still be
in the log (its entry at its offset, with its hash and a valid signature), so a
log rolled back or replaced under a running daemon never gets anchored; the
anchor stays where it was and ``verify`` says what happened.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from chorus.store import AnchorCell, AuditAnchor, StoreError

log = logging.getLogger("chorus.policy")

#: How long the saver waits after a note for more before it writes (a burst is one).
BATCH_S = 0.05
Mac = Callable[[str], str]
LineAt = Callable[[int], str | None]


@dataclass(frozen=True, slots=True)
class Mark:
    """Where the log ends after an append: ``entries`` entries, the last hash, its end."""

    entries: int
    head_hash: str
    end_offset: int


def anchor_key(path: Path) -> str:
    """Which log an anchor row belongs to: this host and the log's absolute path."""
    return f"{socket.gethostname()}:{path.expanduser().resolve()}"


class AnchorKeeper:
    """The anchor of the log at ``path``: notes appends, saves them, loads the anchor.

    ``cell`` makes the store's :class:`AnchorCell` on first use (a broken config or
    an unreachable database is a :class:`StoreError` then); ``mac`` signs;
    ``line_at(offset)`` is the log's line that ends at ``offset`` (None if none)."""

    def __init__(
        self, path: Path, cell: Callable[[], AnchorCell], mac: Mac, line_at: LineAt
    ) -> None:
        self.key = anchor_key(path)
        self._make_cell = cell
        self._cell: AnchorCell | None = None
        self._mac = mac
        self._line_at = line_at
        self._pending_lock = threading.Lock()  # held for a moment: appends never wait on I/O
        self._save_lock = threading.Lock()
        self._pending: Mark | None = None
        self._warned = ""

    # -- appends --------------------------------------------------------------------

    def note(self, mark: Mark) -> None:
        """The log now ends at ``mark``; saved soon by the background saver."""
        with self._pending_lock:
            self._pending = mark
        _SAVER.want(self)

    def flush(self) -> None:
        """Save what is pending now, in this thread (errors are logged, not raised)."""
        with self._save_lock:
            with self._pending_lock:
                mark, self._pending = self._pending, None
            if mark is None:
                return
            try:
                self._save(mark)
            except StoreError as exc:
                self._warn(f"audit anchor not saved: {exc}")

    def _save(self, mark: Mark) -> None:
        for _ in range(5):  # another process may move it between our load and save
            stored = self.cell().load(self.key)
            if stored is not None and stored.entries >= mark.entries:
                return
            if stored is not None and not self.holds(stored):
                self._warn(_DIVERGED.format(n=stored.entries))
                return
            expected = None if stored is None else stored.entries
            if self.cell().advance(self.sign(mark), expected):
                return

    # -- reading --------------------------------------------------------------------

    def cell(self) -> AnchorCell:
        if self._cell is None:
            self._cell = self._make_cell()
        return self._cell

    def load(self) -> AuditAnchor | None:
        """The stored anchor after saving what is pending. Raises :class:`StoreError`."""
        self.flush()
        return self.cell().load(self.key)

    def replace(self, mark: Mark, expected: int) -> None:
        """Move the anchor to ``mark`` whatever the log held before (``reanchor``)."""
        with self._save_lock:
            with self._pending_lock:
                self._pending = None
            if not self.cell().advance(self.sign(mark), expected):
                raise StoreError("the audit anchor moved meanwhile; run it again")

    def adopt(self, mark: Mark) -> None:
        """Anchor a log that has no anchor yet (a log from before anchors, verified)."""
        with self._save_lock:
            self.cell().advance(self.sign(mark), None)

    def sign(self, mark: Mark) -> AuditAnchor:
        mac = self._mac(_signed_text(self.key, mark))
        return AuditAnchor(
            self.key, mark.entries, mark.head_hash, mark.end_offset, mac, time.time()
        )

    def signed(self, anchor: AuditAnchor) -> bool:
        mark = Mark(anchor.entries, anchor.head_hash, anchor.end_offset)
        return anchor.log == self.key and self.sign(mark).mac == anchor.mac

    def holds(self, anchor: AuditAnchor) -> bool:
        """The log still has the anchored entry, where the anchor says, and it is signed."""
        if not self.signed(anchor):
            return False
        line = self._line_at(anchor.end_offset)
        try:
            entry = json.loads(line) if line else None
        except ValueError:
            return False
        if not isinstance(entry, dict):
            return False
        return (entry.get("seq"), entry.get("hash")) == (anchor.entries - 1, anchor.head_hash)

    def _warn(self, message: str) -> None:
        if message != self._warned:  # once per distinct problem, not once per append
            log.error("%s (%s)", message, self.key)
            self._warned = message


_DIVERGED = (
    "audit anchor not moved: the log no longer holds the anchored entry {n} (deleted, "
    "rolled back or replaced); `chorus audit verify` reports it"
)


def _signed_text(key: str, mark: Mark) -> str:
    return f"anchor:{key}:{mark.entries}:{mark.head_hash}:{mark.end_offset}"


class _Saver:
    """One daemon thread saving the keepers that have a note pending; the rest are
    saved at exit."""

    def __init__(self) -> None:
        self._dirty: set[AnchorKeeper] = set()
        self._wake = threading.Condition()
        self._thread: threading.Thread | None = None
        self._exit_hook = False
        os.register_at_fork(after_in_child=self._forked)

    def _forked(self) -> None:
        """A forked child has no saver thread: it starts its own on its first note."""
        self._wake = threading.Condition()
        self._thread = None

    def want(self, keeper: AnchorKeeper) -> None:
        with self._wake:
            self._dirty.add(keeper)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="chorus-audit-anchor", daemon=True
                )
                self._thread.start()
            if not self._exit_hook:
                atexit.register(self.flush_all)
                self._exit_hook = True
            self._wake.notify()

    def _run(self) -> None:
        while True:
            with self._wake:
                self._wake.wait_for(lambda: bool(self._dirty))
            time.sleep(BATCH_S)
            self.flush_all()

    def flush_all(self) -> None:
        with self._wake:
            keepers, self._dirty = self._dirty, set()
        for keeper in keepers:
            keeper.flush()


_SAVER = _Saver()
