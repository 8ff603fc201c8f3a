"""The heartbeat: a built-in interval routine over ``CHORUS_HOME/workspace/HEARTBEAT.md``.

A tick with no unchecked item (``- [ ]``) costs nothing: no job, no model call.
Otherwise one job works the unchecked items. The body cannot write the file (the
workspace is read-only in every sandbox: what a body writes there would be a later
job's prompt); when the job succeeds, the daemon ticks the items it was given,
except those its answer names on a ``NOT DONE: <item>`` line.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from zoneinfo import ZoneInfo

from chorus.config import ChorusConfig
from chorus.routines._load import InvalidRoutine, workspace_dir
from chorus.routines._model import Routine, parse_duration
from chorus.routines._schedule import ActiveHours, Every

HEARTBEAT = "heartbeat"
_UNCHECKED = re.compile(r"^\s*[-*+]\s+\[ \]\s+(\S.*)$")
_NOT_DONE = re.compile(r"^\s*NOT DONE:\s*(\S.*)$", re.MULTILINE)


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
        "Work through them. Do not edit the checklist (it is read-only for you): when "
        "you finish, Chorus ticks off every item above, except each one your answer "
        "names on a line of its own as `NOT DONE: <the item>`. If there is nothing "
        "worth reporting, answer only HEARTBEAT_OK."
    )


def items_done(prompt: str, answer: str) -> list[str]:
    """The items a heartbeat job was given (its prompt's ``- [ ]`` lines) that its
    answer does not name as ``NOT DONE``."""
    not_done = {m.strip() for m in _NOT_DONE.findall(answer)}
    return [item for item in unchecked_items(prompt) if item not in not_done]


def tick_items(path: Path, items: list[str]) -> int:
    """Tick ``items`` in the checklist at ``path`` (each first unchecked line with that
    text); returns how many. Read and written by the daemon without following a link
    (written whole, then renamed over)."""
    try:
        text = _read_nofollow(path)
    except (OSError, UnicodeDecodeError):
        return 0
    lines, ticked = text.split("\n"), 0
    wanted = list(items)
    for n, line in enumerate(lines):
        m = _UNCHECKED.match(line)
        if m and m.group(1).strip() in wanted:
            wanted.remove(m.group(1).strip())
            lines[n] = line.replace("[ ]", "[x]", 1)
            ticked += 1
    if ticked:
        _write_whole(path, "\n".join(lines))
    return ticked


def _read_nofollow(path: Path) -> str:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, encoding="utf-8") as f:
        return f.read()


def _write_whole(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


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
