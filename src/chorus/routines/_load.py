"""The routines folder: every ``*.toml`` in ``CHORUS_HOME/routines`` is one routine.

A bad file makes that routine invalid (listed with its error); the others load.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from chorus.config import ChorusConfig, chorus_home
from chorus.routines._errors import RoutineError
from chorus.routines._model import Routine, load_routine_file


def routines_dir() -> Path:
    """``CHORUS_HOME/routines`` (created 0700 on first use)."""
    path = chorus_home() / "routines"
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return path


def workspace_dir() -> Path:
    """``CHORUS_HOME/workspace``: where routine jobs run by default; holds HEARTBEAT.md."""
    path = chorus_home() / "workspace"
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return path


@dataclass(frozen=True, slots=True)
class InvalidRoutine:
    name: str
    file: str
    error: str


@dataclass(frozen=True, slots=True)
class Loaded:
    """The folder's routines: valid ones by name, and the refused ones."""

    valid: dict[str, Routine] = field(default_factory=dict)
    invalid: list[InvalidRoutine] = field(default_factory=list)


def load_routines(config: ChorusConfig, bodies: list[str], folder: Path | None = None) -> Loaded:
    """Validate every routine file of ``folder`` (default :func:`routines_dir`)."""
    folder = folder or routines_dir()
    workspace = workspace_dir()
    loaded = Loaded()
    for file in sorted(folder.glob("*.toml")):
        try:
            routine = load_routine_file(file, config=config, bodies=bodies, workspace=workspace)
        except RoutineError as exc:
            loaded.invalid.append(InvalidRoutine(file.stem, str(file), str(exc)))
            continue
        loaded.valid[routine.name] = routine
    return loaded
