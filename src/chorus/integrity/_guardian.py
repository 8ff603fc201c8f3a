"""The integrity guardian: SHA-256 baselines of the files that make Chorus who it
is (SOUL.md, MEMORY.md, policy.toml, config.toml), a change Chorus did not make
put aside and undone.

Baselines live in ``CHORUS_HOME/integrity/`` (mode 0700), which the sandbox hides
from every body (it shows only ``memory/``, ``workspace/`` and the socket), so a
body that can write SOUL.md cannot also bless its edit. For each file the
baseline keeps its hash and a copy of its content, so it can be restored.

A check, per file:

====================  ===============================================================
no baseline yet       the file, once it exists, becomes the baseline (first sight: Chorus
                      writes SOUL.md and policy.toml with defaults on first use)
same hash             nothing
changed or deleted    the changed file is moved to ``integrity/quarantine/``, the
                      baseline content written back; an :class:`Incident` is returned
====================  ===============================================================

A deliberate edit is taken with ``chorus integrity accept FILE`` (a local file
operation: no API a body could call); Chorus code that writes one of these files
itself (``chorus init``) calls :func:`Guardian.accept` after writing. The daemon
trusts config.toml and policy.toml as they are when it starts (a person starts it,
and both are validated then) and ``chorus reload`` accepts them; while it runs, a
change to any of the four that was not reloaded or accepted is undone.

No body can write config.toml or policy.toml (the sandbox hides CHORUS_HOME but
for ``memory/`` and ``workspace/``), so a change to them is a person's
edit or something outside every sandbox. A person's edit that a check put aside
before ``chorus reload`` could take it is not lost: the baseline entry names it
(:meth:`Guardian.put_aside`) until the next accept, and ``chorus reload
--take-back`` puts it back, checked, and applies it (:meth:`Guardian.take_back`).
Nothing is taken back without a person asking.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Collection
from dataclasses import asdict, dataclass
from pathlib import Path

from chorus.config import chorus_home

#: The guarded files, by name, relative to CHORUS_HOME.
GUARDED: dict[str, str] = {
    "SOUL.md": "workspace/SOUL.md",
    "MEMORY.md": "memory/MEMORY.md",
    "policy.toml": "policy.toml",
    "config.toml": "config.toml",
}
#: The guarded files a person edits and ``chorus reload`` takes.
RELOADED = ("config.toml", "policy.toml")
_ABSENT = "absent"


@dataclass(frozen=True, slots=True)
class FileState:
    """One guarded file against its baseline."""

    name: str
    path: str
    baseline: str | None  # SHA-256, "absent", or None (no baseline yet)
    current: str  # SHA-256 or "absent"
    accepted_at: float | None

    @property
    def ok(self) -> bool:
        return self.baseline is None or self.baseline == self.current


@dataclass(frozen=True, slots=True)
class Incident:
    """A change Chorus did not make, undone: where the changed file was put."""

    name: str
    path: str
    expected: str
    found: str
    quarantined: str | None  # None: the file had been deleted
    restored: bool
    at: float

    def to_json(self) -> dict[str, object]:
        return asdict(self)


def digest(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except FileNotFoundError:
        return _ABSENT


class Guardian:
    """Baselines, checks and restores for one CHORUS_HOME; stateless between calls
    (everything is read from disk), so the daemon and the CLI may both use one."""

    def __init__(self, home: Path | None = None, clock: Callable[[], float] = time.time) -> None:
        self.home = home or chorus_home()
        self.root = self.home / "integrity"
        self._clock = clock

    # -- reading -------------------------------------------------------------------

    def path_of(self, name: str) -> Path:
        return self.home / GUARDED[name]

    def _baselines(self) -> dict[str, dict[str, object]]:
        try:
            data = json.loads((self.root / "baseline.json").read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def quarantined(self) -> list[str]:
        """Files put aside so far, oldest first."""
        folder = self.root / "quarantine"
        return sorted(str(p) for p in folder.iterdir()) if folder.is_dir() else []

    def status(self) -> list[FileState]:
        base = self._baselines()
        return [self._state(name, base.get(name)) for name in GUARDED]

    def _state(self, name: str, entry: dict[str, object] | None) -> FileState:
        path = self.path_of(name)
        accepted = entry.get("accepted_at") if entry else None
        return FileState(
            name,
            str(path),
            str(entry["sha256"]) if entry else None,
            digest(path),
            float(accepted) if isinstance(accepted, int | float) else None,
        )

    # -- checking ------------------------------------------------------------------

    def check(self, trusted: Collection[str] = ()) -> list[Incident]:
        """Baseline what has none; undo every change since its baseline, except in
        the ``trusted`` files, whose current content becomes their baseline."""
        incidents = []
        for state in self.status():
            if state.baseline is None or (state.name in trusted and not state.ok):
                if state.current != _ABSENT:
                    self.accept(state.name)
            elif not state.ok:
                incidents.append(self._undo(state))
        return incidents

    def _undo(self, state: FileState) -> Incident:
        path = Path(state.path)
        now = self._clock()
        kept = None
        if path.exists():
            kept = self._quarantine(path, state.name, now)
            self._note_put_aside(state.name, kept)
        restored = self._restore(state.name, path, state.baseline or _ABSENT)
        return Incident(
            state.name, state.path, state.baseline or "", state.current, kept, restored, now
        )

    def _quarantine(self, path: Path, name: str, now: float) -> str:
        folder = self._private(self.root / "quarantine")
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(now))
        target = folder / f"{stamp}-{int(now * 1000) % 1000:03d}-{name}"
        os.replace(path, target)
        return str(target)

    def _note_put_aside(self, name: str, kept: str) -> None:
        base = self._baselines()
        if name in base:
            base[name]["put_aside"] = kept
            self._write_baselines(base)

    def _restore(self, name: str, path: Path, expected: str) -> bool:
        copy = self.root / "copies" / name
        try:
            data = copy.read_bytes()
        except FileNotFoundError:
            return False
        if hashlib.sha256(data).hexdigest() != expected:
            return False  # the copy itself is not the baseline: leave it to a person
        _write(path, data)
        return True

    # -- taking back ---------------------------------------------------------------

    def put_aside(self, name: str) -> str | None:
        """The change to ``name`` put aside since its baseline was taken, while the
        file is still that baseline (else there is a newer edit to take instead)."""
        entry = self._baselines().get(name) or {}
        kept = entry.get("put_aside")
        if not isinstance(kept, str) or not self._state(name, entry).ok:
            return None
        found = Path(kept)
        return kept if found.parent == self.root / "quarantine" and found.is_file() else None

    def take_back(self, name: str, check: Callable[[], object]) -> str:
        """Put the change :meth:`put_aside` names back in place and take it as the
        baseline, if ``check`` (reading the file in place) raises nothing; else the
        file and its baseline are left as they were. Returns the put-aside file."""
        kept = self.put_aside(name)
        if kept is None:
            raise LookupError(name)
        path = self.path_of(name)
        before = path.read_bytes() if path.exists() else None
        _write(path, Path(kept).read_bytes())
        self.accept(name)
        try:
            check()
        except Exception:
            self._put(path, before)
            self.accept(name)
            self._note_put_aside(name, kept)  # still there to take, once it is fixed
            raise
        return kept

    @staticmethod
    def _put(path: Path, data: bytes | None) -> None:
        if data is None:
            path.unlink(missing_ok=True)
        else:
            _write(path, data)

    # -- accepting -----------------------------------------------------------------

    def accept(self, name: str) -> FileState:
        """Take the file as it is now as its baseline (a deliberate edit)."""
        if name not in GUARDED:
            raise KeyError(name)
        path = self.path_of(name)
        copies = self._private(self.root / "copies")
        try:
            data: bytes | None = path.read_bytes()
        except FileNotFoundError:
            data = None
        sha = hashlib.sha256(data).hexdigest() if data is not None else _ABSENT
        if data is not None:
            (copies / name).write_bytes(data)
        base = self._baselines()
        entry: dict[str, object] = {"sha256": sha, "accepted_at": float(self._clock())}
        earlier = base.get(name, {})
        if earlier.get("sha256") == sha and "put_aside" in earlier:
            entry["put_aside"] = earlier["put_aside"]  # the same baseline: still waiting
        base[name] = entry
        self._write_baselines(base)
        return self._state(name, entry)

    def _write_baselines(self, base: dict[str, dict[str, object]]) -> None:
        self._private(self.root)
        tmp = self.root / "baseline.json.tmp"
        tmp.write_text(json.dumps(base, indent=2, sort_keys=True))
        os.replace(tmp, self.root / "baseline.json")

    @staticmethod
    def _private(folder: Path) -> Path:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        folder.chmod(0o700)
        return folder


def _write(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` in one step (a reader never sees half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = path.stat().st_mode & 0o777 if path.exists() else 0o600
    tmp = path.with_name(f".{path.name}.chorus-restore")
    tmp.write_bytes(data)
    tmp.chmod(mode)
    os.replace(tmp, path)
