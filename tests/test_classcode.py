"""The data classes' methods compiled once and kept (``chorus._classcode``)."""

from __future__ import annotations

import builtins
import dataclasses
import json
import subprocess
import sys
from dataclasses import field
from pathlib import Path
from typing import Any

import pytest

from chorus import _classcode


@pytest.fixture
def kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A cache file of this test's own, with ``dataclasses`` restored afterwards."""
    monkeypatch.setattr(dataclasses, "exec", builtins.exec, raising=False)
    monkeypatch.setattr(_classcode, "_known", {})
    monkeypatch.setattr(_classcode, "_new", {})
    return tmp_path / "kept.bin"


def _make() -> Any:
    """A class whose annotations are types (this module's are strings)."""
    fields = [
        ("x", int),
        ("y", int, field(default=0)),
        ("tags", list, field(default_factory=list, hash=False)),
    ]
    return dataclasses.make_dataclass("Point", fields, frozen=True, slots=True, kw_only=True)


def _behaviour(point: Any) -> tuple[object, ...]:
    p = point(x=1, tags=["a"])
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.x = 2
    return (
        repr(p),
        p == point(x=1, tags=["a"]),
        hash(point(x=3)) == hash(point(x=3)),
        point.__slots__,
        point.__init__.__annotations__,
        point.__init__.__qualname__,
    )


def test_a_class_behaves_the_same_made_from_kept_code(kept: Path) -> None:
    plain = _behaviour(_make())
    _classcode.install(kept)
    first = _behaviour(_make())
    assert _classcode.stats()["compiled"] > 0
    assert _classcode.save(kept, force=True)
    _classcode._known.clear()
    _classcode._new.clear()
    _classcode.install(kept)  # as the next process would
    again = _behaviour(_make())
    assert _classcode.stats()["compiled"] == 0  # every method came from the file
    # the annotations stay objects: compiled without this module's __future__ import
    assert plain == first == again
    assert plain[4]["x"] is int


def test_a_garbled_or_foreign_file_is_not_read(kept: Path) -> None:
    kept.write_bytes(b"\x00garbage")
    _classcode.install(kept)
    assert _behaviour(_make())  # compiled as before
    assert _classcode.stats()["kept"] == _classcode.stats()["compiled"]
    assert _classcode.save(kept, force=True)
    assert _classcode._read(kept)
    kept.chmod(0o666)  # anyone could have written it: it may hold anyone's code
    assert _classcode._read(kept) == {}


def test_nothing_is_written_when_byte_code_is_not_to_be(
    kept: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _classcode.install(kept)
    _make()
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    assert not _classcode.save(kept)
    assert not kept.exists()
    assert _classcode.save(kept, force=True)  # as ./run asks for it
    assert not _classcode.save(kept, force=True)  # nothing new since


def test_the_daemon_starts_with_the_kept_code(tmp_path: Path) -> None:
    """``python -m chorus._classcode`` keeps every method the daemon's modules make
    (a name that is no module is said and passed over): a process that loads them
    afterwards compiles none."""
    env = {"PYTHONPYCACHEPREFIX": str(tmp_path), "PATH": "/usr/bin:/bin"}
    made = subprocess.run(
        [sys.executable, "-m", "chorus._classcode", "no.such.module", "chorus.daemon._server"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert made.returncode == 0, made.stderr
    assert "not kept: no.such.module" in made.stderr  # and the others are kept
    probe = (
        "from chorus import _classcode as c; c.install(); import chorus.daemon._server;"
        " import json; print(json.dumps(c.stats()))"
    )
    ran = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True)
    assert ran.returncode == 0, ran.stderr
    stats = json.loads(ran.stdout)
    assert stats["compiled"] == 0
    assert stats["kept"] > 500
