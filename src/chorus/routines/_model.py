"""Routine files: ``CHORUS_HOME/routines/NAME.toml``, validated with pydantic.

::

    [routine]
    name = "daily"                  # optional; must equal the file's stem
    schedule = "0 9 * * 1-5"        # or: every = "30m" | at = "2026-12-01T09:00"
                                    # or: trigger = "file_change" + watch_path + debounce
                                    # or: trigger = "manual"
    timezone = "Europe/Paris"       # cron and at; default [routines] timezone
    model_preference = "claude"     # a body; default: the router chooses
    timeout = "30m"
    cwd = "~/notes"                 # default CHORUS_HOME/workspace
    catch_up = "run_latest_once"    # skip_missed | run_latest_once | enqueue_missed
    catch_up_grace = "2h"
    catch_up_cap = 3
    concurrency = "coalesce_if_active"  # skip_if_active | always_enqueue
    enabled = true

    [routine.task]
    prompt = "Summarize {date}; changed: {trigger_path}"
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from chorus.config import ChorusConfig
from chorus.routines._errors import RoutineError
from chorus.routines._schedule import (
    At,
    CatchUpPolicy,
    ConcurrencyPolicy,
    Cron,
    Every,
    Schedule,
    wall_to_instant,
)

TriggerKind = Literal["cron", "interval", "at", "file_change", "manual"]
_IMPLIED: dict[str, TriggerKind] = {"schedule": "cron", "every": "interval", "at": "at"}
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
_DURATION_RE = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, None: 1.0}


def parse_duration(value: str | float) -> float:
    """Seconds from a number or ``"500ms" | "30s" | "5m" | "2h" | "1d"``; ValueError."""
    if isinstance(value, int | float):
        seconds = float(value)
    else:
        match = _DURATION_RE.fullmatch(value.strip())
        if match is None:
            raise ValueError(f"not a duration: {value!r} (use e.g. 30s, 5m, 2h, 1d)")
        seconds = float(match.group(1)) * _UNITS[match.group(2)]
    if seconds <= 0:
        raise ValueError(f"a duration must be positive, got {value!r}")
    return seconds


Duration = str | float


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TaskSpec(_Strict):
    prompt: str = Field(min_length=1)


class RoutineSpec(_Strict):
    """The ``[routine]`` table as written (before the cross-field checks)."""

    name: str | None = None
    trigger: TriggerKind | None = None
    schedule: str | None = None
    every: Duration | None = None
    at: str | None = None
    watch_path: str | None = None
    debounce: Duration = "2s"
    timezone: str | None = None
    model_preference: str | None = None
    timeout: Duration | None = None
    cwd: str | None = None
    catch_up: CatchUpPolicy = "run_latest_once"
    catch_up_grace: Duration = "1h"
    catch_up_cap: int = Field(default=3, ge=0, le=100)
    concurrency: ConcurrencyPolicy = "coalesce_if_active"
    enabled: bool = True
    task: TaskSpec

    @field_validator("every", "debounce", "timeout", "catch_up_grace")
    @classmethod
    def _duration(cls, value: Duration | None) -> Duration | None:
        if value is not None:
            parse_duration(value)
        return value


class RoutineFile(_Strict):
    routine: RoutineSpec


@dataclass(frozen=True, slots=True)
class Routine:
    """A validated routine, ready to schedule. ``schedule`` is None for file-change and
    manual routines."""

    name: str
    file: str
    kind: TriggerKind
    prompt: str
    cwd: str
    catch_up: CatchUpPolicy
    catch_up_grace_s: float
    catch_up_cap: int
    concurrency: ConcurrencyPolicy
    enabled: bool
    schedule: Schedule | None = None
    timezone: str | None = None
    body: str | None = None
    timeout_s: float | None = None
    watch_path: str | None = None
    debounce_s: float = 2.0
    spec: dict[str, Any] = field(default_factory=dict)

    def tz(self) -> ZoneInfo | None:
        return ZoneInfo(self.timezone) if self.timezone else None


# -- loading ------------------------------------------------------------------------------


def parse_routine(
    data: dict[str, Any], *, file: Path, config: ChorusConfig, bodies: list[str], workspace: Path
) -> Routine:
    """Validate one routine file's parsed TOML. Raises :class:`RoutineError` naming the
    file and the key."""
    try:
        spec = RoutineFile.model_validate(data).routine
    except ValidationError as exc:
        raise RoutineError(f"{file}: {_problems(exc)}") from exc
    check = _Checker(file)
    name = check.name(spec.name, file.stem)
    kind = check.kind(spec)
    tz = check.timezone(spec, kind, config.routines.timezone)
    return Routine(
        name=name,
        file=str(file),
        kind=kind,
        prompt=spec.task.prompt,
        schedule=check.schedule(spec, kind, tz),
        timezone=tz.key if tz else None,
        body=check.body(spec.model_preference, bodies),
        timeout_s=None if spec.timeout is None else parse_duration(spec.timeout),
        cwd=str(check.cwd(spec.cwd, workspace)),
        catch_up=spec.catch_up,
        catch_up_grace_s=parse_duration(spec.catch_up_grace),
        catch_up_cap=spec.catch_up_cap,
        concurrency=spec.concurrency,
        enabled=spec.enabled,
        watch_path=check.watch_path(spec, kind),
        debounce_s=parse_duration(spec.debounce),
        spec=spec.model_dump(mode="json"),
    )


def load_routine_file(
    file: Path, *, config: ChorusConfig, bodies: list[str], workspace: Path
) -> Routine:
    """Read and validate ``file``; :class:`RoutineError` when it cannot be used."""
    try:
        data = tomllib.loads(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise RoutineError(f"{file}: cannot read: {exc.strerror}") from exc
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise RoutineError(f"{file}: not valid TOML: {exc}") from exc
    return parse_routine(data, file=file, config=config, bodies=bodies, workspace=workspace)


def _has_offset(text: str | None) -> bool:
    try:
        return text is not None and datetime.fromisoformat(text).tzinfo is not None
    except ValueError:
        return False


def _problems(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors()
    )


class _Checker:
    """The cross-field checks of one file; each raises :class:`RoutineError`."""

    def __init__(self, file: Path) -> None:
        self.file = file

    def fail(self, key: str, message: str) -> RoutineError:
        return RoutineError(f"{self.file}: routine.{key}: {message}")

    def name(self, given: str | None, stem: str) -> str:
        if not _NAME_RE.fullmatch(stem):
            raise self.fail("name", f"file name {stem!r}: use letters, digits, '-', '_'")
        if given is not None and given != stem:
            raise self.fail("name", f"{given!r} differs from the file name {stem!r}")
        return stem

    def kind(self, spec: RoutineSpec) -> TriggerKind:
        given = {
            k: v
            for k, v in (("schedule", spec.schedule), ("every", spec.every), ("at", spec.at))
            if v is not None
        }
        if len(given) > 1:
            raise self.fail(next(iter(given)), f"give only one of {', '.join(given)}")
        implied = _IMPLIED.get(next(iter(given), ""))
        kind = spec.trigger or implied
        if kind is None:
            raise self.fail("schedule", "missing: set schedule, every, at or trigger")
        if spec.trigger is not None and implied is not None and spec.trigger != implied:
            raise self.fail("trigger", f"{spec.trigger!r} does not go with {next(iter(given))}")
        if kind in ("cron", "interval", "at") and implied is None:
            key = {"cron": "schedule", "interval": "every", "at": "at"}[kind]
            raise self.fail(key, f"missing for trigger = {kind!r}")
        return kind

    def timezone(
        self, spec: RoutineSpec, kind: TriggerKind, default: str | None
    ) -> ZoneInfo | None:
        key = spec.timezone or default
        if key is None:
            if kind == "cron" or (kind == "at" and not _has_offset(spec.at)):
                raise self.fail(
                    "timezone",
                    'missing: set timezone = "Area/City" here or routines.timezone'
                    " in config.toml (Chorus never assumes UTC)",
                )
            return None
        try:
            return ZoneInfo(key)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            where = "timezone" if spec.timezone else "timezone (from routines.timezone)"
            raise self.fail(where, f"unknown timezone {key!r}") from exc

    def schedule(
        self, spec: RoutineSpec, kind: TriggerKind, tz: ZoneInfo | None
    ) -> Schedule | None:
        if kind == "cron":
            assert spec.schedule is not None
            assert tz is not None
            from croniter import croniter  # here: it costs the daemon's start

            if not croniter.is_valid(spec.schedule):
                raise self.fail("schedule", f"bad cron expression {spec.schedule!r}")
            return Cron(spec.schedule, tz)
        if kind == "interval":
            assert spec.every is not None
            return Every(parse_duration(spec.every))
        if kind == "at":
            assert spec.at is not None
            return At(self._at(spec.at, tz))
        return None

    def _at(self, text: str, tz: ZoneInfo | None) -> float:
        try:
            when = datetime.fromisoformat(text)
        except ValueError as exc:
            raise self.fail("at", f"not an ISO date-time: {text!r}") from exc
        if when.tzinfo is not None:
            return when.timestamp()
        assert tz is not None  # timezone() refused a naive time without one
        return wall_to_instant(when, tz)

    def body(self, body: str | None, bodies: list[str]) -> str | None:
        if body is not None and body not in bodies:
            raise self.fail(
                "model_preference", f"unknown body {body!r} (known: {', '.join(bodies)})"
            )
        return body

    def cwd(self, cwd: str | None, workspace: Path) -> Path:
        if cwd is None:
            return workspace
        folder = Path(cwd).expanduser()
        if not folder.is_dir():
            raise self.fail("cwd", f"{folder} is not a folder")
        return folder.resolve()

    def watch_path(self, spec: RoutineSpec, kind: TriggerKind) -> str | None:
        if kind != "file_change":
            if spec.watch_path is not None:
                raise self.fail("watch_path", 'only for trigger = "file_change"')
            return None
        if spec.watch_path is None:
            raise self.fail("watch_path", 'missing for trigger = "file_change"')
        path = Path(spec.watch_path).expanduser()
        if not path.exists():
            raise self.fail("watch_path", f"{path} does not exist")
        return str(path.resolve())
