"""Native flags for one-shot bodies, taken only from ``native_flags.toml``.

A body with a permission callback asks Chorus about every tool call; a one-shot
body (``claude -p``, ``codex exec``, ``gemini -p``) cannot, so its CLI has to
enforce the policy with its own flags. :func:`native_flags` picks them from the
data file for the session's permission mode, adds the deny rules the CLI can
express (Claude's ``--disallowedTools``, Codex's writable roots), and emits a
*dangerous* flag only when the file allows it, the mode is
``bypassPermissions`` and ``policy.toml`` sets ``native.allow_dangerous``;
otherwise it falls back to the body's safer mode and says so in ``notes``.
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from chorus._errors import ConfigError, UnknownBodyError
from chorus.policy._gemini_policy import (
    admin_tier_free,
    denied_path_forms,
    gemini_policy_toml,
    write_policy_file,
)
from chorus.policy._model import PERMISSION_MODES, PermissionMode, Policy
from chorus.policy._paths import PathContext

_GLOBS = frozenset("*?[")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class BodyFlags(_Strict):
    """One body's entry in the data file."""

    default: list[str]
    accept_edits: list[str] = Field(alias="acceptEdits")
    plan: list[str]
    bypass: list[str] = Field(alias="bypassPermissions")
    fallback: PermissionMode = "acceptEdits"
    dangerous_env: dict[str, str] = Field(default_factory=dict)
    deny_flag: str | None = None
    deny_command: str | None = None
    deny_read: str | None = None
    deny_edit: str | None = None
    writable_roots: str | None = None
    ask_flag: str | None = None
    ask_shell: str | None = None
    policy_flag: str | None = None
    policy_flag_fallback: str | None = None

    def for_mode(self, mode: PermissionMode) -> list[str]:
        return {
            "default": self.default,
            "acceptEdits": self.accept_edits,
            "plan": self.plan,
            "bypassPermissions": self.bypass,
        }[mode]


class DangerousFlag(_Strict):
    """A flag that switches a CLI's own checks off."""

    body: str
    flag: str
    allowed: bool
    why: str


class NativeTable(_Strict):
    """The whole data file: per-body flags and the dangerous-flag list."""

    bodies: dict[str, BodyFlags]
    dangerous: list[DangerousFlag]
    #: long-lived body -> the one-shot body whose rules it shares (``_native_rules``)
    long_lived: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _dangerous_only_in_bypass(self) -> NativeTable:
        unknown = sorted(set(self.long_lived.values()) - set(self.bodies))
        if unknown:
            raise ValueError(f"long_lived names bodies the file does not list: {unknown}")
        for name, flags in self.bodies.items():
            if flags.fallback == "bypassPermissions":
                raise ValueError(f"{name}: fallback cannot be bypassPermissions")
            for mode in PERMISSION_MODES:
                if mode == "bypassPermissions":
                    continue
                bad = set(flags.for_mode(mode)) & self.dangerous_for(name)
                if bad:
                    raise ValueError(f"{name}.{mode} uses dangerous flags {sorted(bad)}")
        return self

    def dangerous_for(self, body: str) -> set[str]:
        return {d.flag for d in self.dangerous if d.body == body}

    def allowed_dangerous(self, body: str) -> set[str]:
        return {d.flag for d in self.dangerous if d.body == body and d.allowed}


def _read_default() -> str:
    return resources.files("chorus.policy").joinpath("native_flags.toml").read_text("utf-8")


@cache
def _default_table() -> NativeTable:
    return parse_native_table(_read_default(), source="chorus/policy/native_flags.toml")


def parse_native_table(text: str, *, source: str = "native_flags.toml") -> NativeTable:
    """Parse and validate a native-flags data file; :class:`ConfigError` when invalid."""
    try:
        return NativeTable.model_validate(tomllib.loads(text))
    except (tomllib.TOMLDecodeError, ValidationError) as exc:
        raise ConfigError(f"{source}: {exc}") from exc


def load_native_table(path: Path | None = None) -> NativeTable:
    """The table from ``path``, or the packaged ``native_flags.toml``."""
    if path is None:
        return _default_table()
    return parse_native_table(path.read_text(encoding="utf-8"), source=str(path))


@dataclass(frozen=True, slots=True)
class NativeFlags:
    """Flags and environment for one run. ``mode`` is the mode really used (it differs
    from the requested one when a dangerous flag was refused); ``notes`` say why."""

    body: str
    mode: PermissionMode
    args: tuple[str, ...]
    env: dict[str, str]
    dangerous: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


def native_flags(
    body: str,
    policy: Policy,
    *,
    mode: PermissionMode | None = None,
    ctx: PathContext | None = None,
    table: NativeTable | None = None,
) -> NativeFlags:
    """The native flags for ``body`` under ``policy`` in ``mode`` (default: the policy's).

    Raises :class:`UnknownBodyError` for a body the data file does not list
    (bodies with a permission callback need no native flags).
    """
    table = table or load_native_table()
    entry = table.bodies.get(body)
    if entry is None:
        raise UnknownBodyError(f"no native flags for body {body!r}; known: {sorted(table.bodies)}")
    requested = mode or policy.mode
    effective, notes = _effective_mode(body, entry, table, policy, requested)
    args = list(entry.for_mode(effective))
    used_dangerous = tuple(a for a in args if a in table.dangerous_for(body))
    env = dict(entry.dangerous_env) if used_dangerous else {}
    ctx = ctx or PathContext.current()
    args += deny_rules(entry, policy, ctx)
    args += writable_roots(entry, policy, ctx)
    args += policy_file_args(entry, policy, ctx)
    if used_dangerous:
        notes.append(
            "the CLI skips its own checks: only the deny rules it understands apply "
            "(shell risk, exfiltration and domain rules are not enforced in this mode)"
        )
    return NativeFlags(body, effective, tuple(args), env, used_dangerous, tuple(notes))


def _effective_mode(
    body: str, entry: BodyFlags, table: NativeTable, policy: Policy, mode: PermissionMode
) -> tuple[PermissionMode, list[str]]:
    if mode != "bypassPermissions":
        return mode, []
    wanted = set(entry.bypass) & table.dangerous_for(body)
    refused = sorted(wanted - table.allowed_dangerous(body))
    if refused:
        return entry.fallback, [
            f"{', '.join(refused)} is not allowed by native_flags.toml; using {entry.fallback}"
        ]
    if wanted and not policy.native.allow_dangerous:
        return entry.fallback, [
            f"policy native.allow_dangerous is false; using {entry.fallback} "
            f"instead of {', '.join(sorted(wanted))}"
        ]
    return mode, []


def _claude_path(pattern: str) -> str:
    # Claude's rule paths: "//abs" is absolute, "~/x" is home-relative, "**/x" is anywhere.
    return "/" + pattern if pattern.startswith("/") else pattern


def deny_rules(
    entry: BodyFlags, policy: Policy, ctx: PathContext, *, commands: bool = True
) -> list[str]:
    """``entry.deny_flag`` and its rules: denied commands (unless ``commands`` is
    false), reads and edits of denied paths."""
    if entry.deny_flag is None:
        return []
    rules: list[str] = []
    if commands and entry.deny_command and policy.shell.mode != "unrestricted":
        for command in policy.shell.denied_commands:
            prefix = command.rstrip("*").strip()
            if prefix and not _GLOBS.intersection(prefix):
                rules.append(entry.deny_command.format(command=prefix))
    rules += _path_rules(entry, policy, ctx)
    return [entry.deny_flag, *rules] if rules else []


def ask_rules(entry: BodyFlags, policy: Policy, ctx: PathContext) -> list[str]:
    """``entry.ask_flag`` and a settings JSON of *ask* rules (for a body whose CLI asks
    Chorus): every shell command, and reads and edits of denied paths. The CLI then
    asks where it would have approved by itself, and Chorus refuses with its reason
    in the tool result (a deny rule would refuse with the CLI's own words)."""
    if entry.ask_flag is None:
        return []
    rules = [entry.ask_shell] if entry.ask_shell else []
    rules += _path_rules(entry, policy, ctx)
    settings = {"permissions": {"ask": rules}}
    return [entry.ask_flag, json.dumps(settings, separators=(",", ":"))] if rules else []


def _path_rules(entry: BodyFlags, policy: Policy, ctx: PathContext) -> list[str]:
    """Read and edit rules for every denied path (a folder's contents too)."""
    rules: list[str] = []
    for pattern in policy.filesystem.denied_paths:
        for expanded in denied_path_forms(pattern, ctx):
            paths = [expanded] if _GLOBS.intersection(expanded) else [expanded, expanded + "/**"]
            for template in (entry.deny_read, entry.deny_edit):
                if template:
                    rules += [template.format(path=_claude_path(p)) for p in paths]
    return rules


def allowed_roots(policy: Policy, ctx: PathContext) -> list[str]:
    """The policy's allowed paths besides the body's folder, expanded."""
    return [ctx.expand(p) for p in policy.filesystem.allowed_paths if p != "{cwd}"]


def writable_roots(
    entry: BodyFlags, policy: Policy, ctx: PathContext, also: tuple[str, ...] = ()
) -> list[str]:
    """The ``-c`` override that makes the allowed roots (and ``also``) writable (Codex)."""
    extra = [*allowed_roots(policy, ctx), *also]
    if entry.writable_roots is None or not extra:
        return []
    return ["-c", entry.writable_roots.format(roots=json.dumps(extra))]


def policy_file_args(
    entry: BodyFlags, policy: Policy, ctx: PathContext, *, asks: bool = False
) -> list[str]:
    """``entry.policy_flag`` and the policy file written for it (Gemini); ``asks``:
    the body has a permission callback (see :func:`gemini_policy_toml`)."""
    if entry.policy_flag is None:
        return []
    flag = entry.policy_flag
    if entry.policy_flag_fallback and not admin_tier_free():
        flag = entry.policy_flag_fallback
    return [flag, str(write_policy_file(gemini_policy_toml(policy, ctx, asks=asks)))]


def dangerous_flags(body: str | None = None) -> list[DangerousFlag]:
    """The dangerous flags the data file lists (for ``chorus policy show``)."""
    return [d for d in load_native_table().dangerous if body is None or d.body == body]
