"""The heartbeat: a built-in interval routine over ``CHORUS_HOME/workspace/HEARTBEAT.md``.

A tick with no unchecked item (``- [ ]``) costs nothing: no job, no model call.
Otherwise one job works the unchecked items and ticks them off in the file.
"""

from __future__ import annotations

import re
from pathlib import Path
from zoneinfo import ZoneInfo

from chorus.config import ChorusConfig
from chorus.routines._load import InvalidRoutine, workspace_dir
from chorus.routines._model import Routine, parse_duration
from chorus.routines._schedule import ActiveHours, Every

HEARTBEAT = "heartbeat"
_UNCHECKED = re.compile(r"^\s*[-*+]\s+\[ \]\s+(\S.*)$")


def heartbeat_path() -> Path:
    return workspace_dir() / "HEARTBEAT.md"


def unchecked_items(text: str) -> list[str]:
    """The text of every unchecked Markdown task item (``- [ ] ...``), in order."""
    return [m.group(1).strip() for line in text.split("\n") if (m := _UNCHECKED.match(line))]


def read_unchecked(path: Path | None = None) -> list[str]:
    """Unchecked items of HEARTBEAT.md (none when the file is missing)."""
    try:
        return unchecked_items((path or heartbeat_path()).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError):
        return []


def heartbeat_prompt(path: Path, items: list[str]) -> str:
    listed = "\n".join(f"- [ ] {item}" for item in items)
    return (
        f"Chorus heartbeat. The checklist {path.name} (in your working folder) has "
        f"these unchecked items:\n{listed}\n\n"
        "Work through them. Each time one is done, tick it in the file by changing its "
        "`- [ ]` to `- [x]`, leaving the rest of the file as it is. You may add new "
        "unchecked items for follow-up work. If there is nothing worth reporting, "
        "answer only HEARTBEAT_OK."
    )


def heartbeat_routine(config: ChorusConfig) -> Routine | InvalidRoutine | None:
    """The heartbeat as a routine (None when ``[routines] heartbeat = false``)."""
    rc = config.routines
    if not rc.heartbeat:
        return None
    where = "config.toml: routines"
    try:
        every = parse_duration(rc.heartbeat_interval)
        if rc.active_hours is not None:
            ActiveHours.parse(rc.active_hours)
            if rc.timezone is None:
                raise ValueError("active_hours needs [routines] timezone")
    except ValueError as exc:
        return InvalidRoutine(HEARTBEAT, where, f"{where}: {exc}")
    return Routine(
        name=HEARTBEAT,
        file=where,
        kind="interval",
        prompt="",
        cwd=str(workspace_dir()),
        # A heartbeat that was down for a while ticks once, not once per missed slot.
        catch_up="run_latest_once",
        catch_up_grace_s=every,
        catch_up_cap=1,
        concurrency="skip_if_active",
        enabled=True,
        schedule=Every(every),
        timezone=rc.timezone,
        body=rc.heartbeat_body,
    )


def active_now(config: ChorusConfig, now: float) -> bool:
    rc = config.routines
    routine_tz = heartbeat_tz(config)
    if rc.active_hours is None or routine_tz is None:
        return True
    return ActiveHours.parse(rc.active_hours).contains(now, routine_tz)


def heartbeat_tz(config: ChorusConfig) -> ZoneInfo | None:
    return ZoneInfo(config.routines.timezone) if config.routines.timezone else None
