"""``CHORUS_HOME/policy.toml``: one capability policy for every body.

The file is loaded with tomllib and validated with pydantic; unknown keys are
errors. When it does not exist, :func:`load_policy` writes the commented
default (:data:`DEFAULT_POLICY_TOML`) so a person has something to edit, and a
test pins that the template parses to exactly :class:`Policy` ``()``.
"""

from __future__ import annotations

import os
import re
import shlex
import tomllib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from chorus._errors import ConfigError
from chorus.config import chorus_home
from chorus.policy._paths import SENSITIVE_PATHS, unknown_placeholders

PermissionMode = Literal["default", "acceptEdits", "plan", "bypassPermissions"]
PERMISSION_MODES: tuple[PermissionMode, ...] = (
    "default",
    "acceptEdits",
    "plan",
    "bypassPermissions",
)
Authority = Literal["advisory", "escalate-only", "governing"]
Environment = Literal["dev", "staging", "prod"]
ShellMode = Literal["allowlist", "denylist", "unrestricted"]
Decision = Literal["allow", "deny"]

_DOMAIN = re.compile(r"^(\*\.)?[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$")
_SECRET_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

DEFAULT_DENIED_COMMANDS: tuple[str, ...] = (
    "sudo",
    "su",
    "doas",
    "pkexec",
    "runuser",
    "mkfs",
    "mkfs.*",
    "wipefs",
    "shred",
    "shutdown",
    "reboot",
    "halt",
    "poweroff",
    "dd of=/dev/*",
    "chmod -R 777 *",
    "git push --force*",
    "git push -f*",
)

DEFAULT_ALLOWED_COMMANDS: tuple[str, ...] = (
    "ls",
    "cat",
    "head",
    "tail",
    "wc",
    "echo",
    "printf",
    "pwd",
    "grep",
    "rg",
    "find",
    "sort",
    "uniq",
    "diff",
    "git status",
    "git diff",
    "git log",
    "git show",
    "python",
    "python3",
    "pytest",
    "uv",
    "make",
    "true",
    "false",
    "test",
)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _check_paths(values: list[str]) -> list[str]:
    for value in values:
        if not value or "\x00" in value:
            raise ValueError(f"unusable path pattern {value!r}")
        unknown = unknown_placeholders(value)
        if unknown:
            raise ValueError(f"{value!r}: unknown placeholder {', '.join(unknown)}")
    return values


def _check_commands(values: list[str]) -> list[str]:
    for value in values:
        try:
            words = shlex.split(value)
        except ValueError as exc:
            raise ValueError(f"{value!r}: {exc}") from exc
        if not words:
            raise ValueError("empty command rule")
    return values


class FilesystemPolicy(_Strict):
    """Where tools may read and write. Placeholders: {cwd} {home} {tmp} {chorus_home}."""

    allowed_paths: list[str] = Field(default_factory=lambda: ["{cwd}"])
    read_only_paths: list[str] = Field(
        default_factory=lambda: ["/usr", "/lib", "/opt", "/etc", "/bin", "/proc/self"]
    )
    denied_paths: list[str] = Field(default_factory=lambda: list(SENSITIVE_PATHS))

    _paths = field_validator("allowed_paths", "read_only_paths", "denied_paths")(_check_paths)


class ShellPolicy(_Strict):
    """Which commands run. Rules are words matched from the start of each command
    (``git push`` matches ``git push origin``); a word may be a glob."""

    mode: ShellMode = "denylist"
    allowed_commands: list[str] = Field(default_factory=lambda: list(DEFAULT_ALLOWED_COMMANDS))
    denied_commands: list[str] = Field(default_factory=lambda: list(DEFAULT_DENIED_COMMANDS))
    deny_download_exec: bool = True
    timeout_s: float = Field(default=600.0, gt=0)
    command_timeouts: dict[str, float] = Field(default_factory=dict)

    _commands = field_validator("allowed_commands", "denied_commands")(_check_commands)

    @field_validator("command_timeouts")
    @classmethod
    def _positive(cls, value: dict[str, float]) -> dict[str, float]:
        bad = [name for name, seconds in value.items() if seconds <= 0]
        if bad:
            raise ValueError(f"timeouts must be positive: {', '.join(bad)}")
        return value

    def timeout_for(self, command: str) -> float:
        """The timeout in seconds for a command whose name is ``command``."""
        return self.command_timeouts.get(command, self.timeout_s)


class NetworkPolicy(_Strict):
    """Domains tools may reach. An empty ``allowed_domains`` allows any domain not denied."""

    allowed_domains: list[str] = Field(default_factory=list)
    denied_domains: list[str] = Field(default_factory=list)

    @field_validator("allowed_domains", "denied_domains")
    @classmethod
    def _domains(cls, values: list[str]) -> list[str]:
        for value in values:
            if not _DOMAIN.match(value.lower()):
                raise ValueError(f"{value!r} is not a domain (use example.com or *.example.com)")
        return [v.lower() for v in values]


class McpPolicy(_Strict):
    """MCP servers whose tools may be called (``*`` allows all)."""

    allowed_servers: list[str] = Field(default_factory=list)


class RiskPolicy(_Strict):
    """How much the risk heuristics decide, and where this machine runs."""

    authority: Authority = "governing"
    environment: Environment = "dev"


class AskPolicy(_Strict):
    """An ``ask`` raises a flag; unanswered after ``timeout_s`` it takes ``default``."""

    timeout_s: float = Field(default=300.0, gt=0)
    default: Decision = "deny"


class SecretsPolicy(_Strict):
    """Which stored secrets are passed to bodies as environment variables."""

    env_allowed: list[str] = Field(default_factory=list)
    body_env: dict[str, list[str]] = Field(default_factory=dict)

    @field_validator("env_allowed")
    @classmethod
    def _names(cls, values: list[str]) -> list[str]:
        for value in values:
            if not _SECRET_NAME.match(value):
                raise ValueError(f"{value!r} is not a secret name")
        return values

    def allowed_for(self, body: str) -> list[str]:
        """Secret names that ``body`` may receive."""
        return [*self.env_allowed, *self.body_env.get(body, [])]


class NativePolicy(_Strict):
    """One-shot bodies have no permission callback; may they get the dangerous flags?"""

    allow_dangerous: bool = False


class Policy(_Strict):
    """The whole policy file."""

    version: Literal[1] = 1
    mode: PermissionMode = "default"
    filesystem: FilesystemPolicy = Field(default_factory=FilesystemPolicy)
    shell: ShellPolicy = Field(default_factory=ShellPolicy)
    network: NetworkPolicy = Field(default_factory=NetworkPolicy)
    mcp: McpPolicy = Field(default_factory=McpPolicy)
    risk: RiskPolicy = Field(default_factory=RiskPolicy)
    ask: AskPolicy = Field(default_factory=AskPolicy)
    secrets: SecretsPolicy = Field(default_factory=SecretsPolicy)
    native: NativePolicy = Field(default_factory=NativePolicy)


def _toml_list(values: tuple[str, ...] | list[str], indent: str = "  ") -> str:
    inner = "".join(f"{indent}{_toml_str(v)},\n" for v in values)
    return f"[\n{inner}]"


def _toml_str(value: str) -> str:
    escaped = value.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'


DEFAULT_POLICY_TOML = f"""\
# Chorus policy: one set of rules for every body (Claude Code, Codex, Gemini, ACP).
# Generated on first run; edit freely. `chorus policy check` validates this file.
version = 1

# Permission mode, the same on every body:
#   default            policy rules apply; elevated risk asks a person
#   acceptEdits        as default, but file edits inside the allowed roots never ask
#   plan               read-only: no writes, no shell except read-only commands
#   bypassPermissions  never ask; only the hard rules below deny
mode = "default"

[filesystem]
# Placeholders: {{cwd}} (the session's working directory), {{home}}, {{tmp}}, {{chorus_home}}.
allowed_paths = ["{{cwd}}"]
read_only_paths = ["/usr", "/lib", "/opt", "/etc", "/bin", "/proc/self"]
# Patterns: a plain path denies itself and everything under it; * and ** match across /.
denied_paths = {_toml_list(SENSITIVE_PATHS)}

[shell]
# allowlist: only allowed_commands run; denylist: anything but denied_commands;
# unrestricted: no command lists (download-and-execute and risk checks still apply).
mode = "denylist"
allowed_commands = {_toml_list(DEFAULT_ALLOWED_COMMANDS)}
denied_commands = {_toml_list(DEFAULT_DENIED_COMMANDS)}
# Deny piping a download into an interpreter (curl ... | sh, bash <(curl ...)).
deny_download_exec = true
# Seconds; enforced where the body accepts a rewritten tool input (Claude's Bash).
timeout_s = 600.0

[shell.command_timeouts]
# pytest = 1800.0

[network]
# Empty allowed_domains = any domain that is not denied. *.example.com matches subdomains.
allowed_domains = []
denied_domains = []

[mcp]
# MCP servers whose tools may run; "*" allows every server.
allowed_servers = []

[risk]
# advisory: risk is recorded only; escalate-only: elevated/critical risk asks a person;
# governing: elevated asks, critical is denied.
authority = "governing"
# dev | staging | prod (prod raises every risky action one level).
environment = "dev"

[ask]
# An ask raises a flag (`chorus flags`, `chorus flag answer ID allow|deny`);
# unanswered after timeout_s seconds it takes the default, so work never blocks.
timeout_s = 300.0
default = "deny"

[secrets]
# Stored secrets (`chorus secret set`) passed to every body as environment variables.
env_allowed = []

[secrets.body_env]
# claude = ["ANTHROPIC_API_KEY"]

[native]
# One-shot bodies have no permission callback. Allow the dangerous native flags
# (listed in chorus/policy/native_flags.toml) when mode = "bypassPermissions"?
allow_dangerous = false
"""


def policy_path() -> Path:
    """``CHORUS_HOME/policy.toml``."""
    return chorus_home() / "policy.toml"


def parse_policy(text: str, *, source: str = "policy.toml") -> Policy:
    """Parse and validate policy TOML. Raises :class:`ConfigError` naming the bad key."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: not valid TOML: {exc}") from exc
    try:
        return Policy.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '(top)'}: {err['msg']}"
            for err in exc.errors()
        )
        raise ConfigError(f"{source}: {problems}") from exc


def write_default_policy(path: Path) -> None:
    """Write :data:`DEFAULT_POLICY_TOML` to ``path`` unless a file is already there."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return  # another process generated it first; theirs is as good
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(DEFAULT_POLICY_TOML)


def load_policy(path: Path | None = None, *, create: bool = True) -> Policy:
    """Load the policy; generate the default file first when it is missing and ``create``."""
    path = path or policy_path()
    if not path.exists():
        if not create:
            return Policy()
        write_default_policy(path)
    _check_not_writable_by_others(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from exc
    return parse_policy(text, source=str(path))


def _check_not_writable_by_others(path: Path) -> None:
    """A policy others can rewrite is no policy: refuse it, as the token is refused."""
    try:
        mode = path.stat().st_mode & 0o777
    except OSError:
        return
    if mode & 0o022:
        raise ConfigError(
            f"{path} has mode {mode:o}: group or others can change the policy; "
            f"run chmod 600 {path}"
        )
