"""Creating and removing routine files (CLI, daemon API, the ``schedule_routine`` tool).

A routine is validated completely before its file is written, and written
atomically (temporary file, then rename): bad input writes nothing.
"""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path
from typing import Any

from chorus.bodies import body_names
from chorus.config import load_config
from chorus.routines._errors import RoutineError, UnknownRoutineError
from chorus.routines._heartbeat import HEARTBEAT
from chorus.routines._model import Routine, parse_routine


def _folders(home: Path) -> tuple[Path, Path]:
    routines, workspace = home / "routines", home / "workspace"
    for folder in (routines, workspace):
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    return routines, workspace


def create_routine(home: Path, text: str, *, name: str | None = None) -> Routine:
    """Validate the TOML ``text`` of a routine and write it to
    ``home/routines/NAME.toml`` (``NAME``: its ``[routine] name``, else ``name``).
    Raises :class:`RoutineError` (nothing written) if it is invalid or exists."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise RoutineError(f"not valid TOML: {exc}") from exc
    table = data.get("routine")
    given = table.get("name") if isinstance(table, dict) else None
    final = given if isinstance(given, str) else name
    if not final:
        raise RoutineError("routine.name: missing (or name the file NAME.toml)")
    if final == HEARTBEAT:
        raise RoutineError("routine.name: 'heartbeat' is the built-in heartbeat's name")
    routines, workspace = _folders(home)
    target = routines / f"{final}.toml"
    config = load_config(home / "config.toml")
    routine = parse_routine(
        data, file=target, config=config, bodies=body_names(config), workspace=workspace
    )
    if target.exists():
        raise RoutineError(f"{target}: a routine named {final!r} exists (remove it first)")
    _write_atomic(target, text)
    return routine


def remove_routine_file(home: Path, name: str) -> Path:
    """Delete ``home/routines/NAME.toml``; :class:`UnknownRoutineError` if absent."""
    target = home / "routines" / f"{name}.toml"
    if "/" in name or not target.is_file():
        raise UnknownRoutineError(name)
    target.unlink()
    return target


def _write_atomic(target: Path, text: str) -> None:
    tmp = target.with_name(f".{target.name}.tmp")
    with tmp.open("w", encoding="utf-8") as out:
        out.write(text)
        out.flush()
        os.fsync(out.fileno())
    tmp.replace(target)


# -- the schedule_routine tool -------------------------------------------------------------------


def routine_toml(spec: dict[str, Any]) -> str:
    """TOML text of a routine given as a flat dict: the ``[routine]`` keys plus
    ``prompt`` (scalars only). Raises :class:`RoutineError` for other values."""
    fields = {k: v for k, v in spec.items() if k != "prompt"}
    lines = ["[routine]"]
    for key, value in fields.items():
        lines.append(f"{_bare_key(key)} = {_scalar(key, value)}")
    lines += ["", "[routine.task]", f"prompt = {_scalar('prompt', spec.get('prompt', ''))}"]
    return "\n".join(lines) + "\n"


def _bare_key(key: str) -> str:
    if not key.replace("_", "").isalnum():
        raise RoutineError(f"routine.{key}: not a routine key")
    return key


def _scalar(key: str, value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # a valid TOML basic string
    raise RoutineError(f"routine.{key}: expected a string, number or boolean")


def schedule_routine(home: Path, spec: dict[str, Any]) -> dict[str, Any]:
    """The ``schedule_routine`` tool on Chorus's MCP server: an agent schedules
    follow-up work. ``spec`` is flat: ``name``, ``prompt`` and any ``[routine]`` key
    (``schedule``/``every``/``at``/``trigger``, ``timezone``, ``model_preference`` ...).
    The daemon picks the file up on its next tick. Returns what was scheduled;
    raises :class:`RoutineError` (nothing written) for a bad spec."""
    routine = create_routine(home, routine_toml(spec))
    return {
        "name": routine.name,
        "file": routine.file,
        "trigger": routine.kind,
        "timezone": routine.timezone,
    }
