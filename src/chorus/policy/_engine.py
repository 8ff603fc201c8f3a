"""Decisions: one :class:`PermissionAsk` in, ``allow`` / ``deny`` / ``ask`` out, with a reason.

:meth:`PolicyEngine.decide` is the whole policy, in three steps::

    1. hard rules     secrets in the input, exfiltration flows, denied or out-of-root
                      paths, shell command lists, download-and-execute, network
                      domains, MCP servers. A hit denies, in every mode.
    2. mode           plan: read-only (writes, MCP, unknown tools and non-read-only
                      shell denied); bypassPermissions: allow (no asks).
    3. risk           heuristic level under the policy's authority: elevated asks,
                      critical denies (governing). acceptEdits lets file edits
                      through short of critical. A command that runs after a
                      directory change Chorus cannot follow (``cd "$X"``, ``cd -``,
                      ``popd`` of nothing) asks whatever the authority.

The modes therefore mean the same on every body: the body is started in its
native mode that routes every tool call to the callback, and Chorus decides.

:class:`PolicyGate` (built by :func:`policy_callback`) wraps the engine as a
body's permission callback: it audits every decision, turns ``ask`` into a
flag a person can answer (the default applies after the timeout, so work never
blocks), and watches tool results for prompt injection.
"""

from __future__ import annotations

import inspect
import os
import re
import shlex
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from chorus.config import DEFAULT_PORT
from chorus.events import Event, PermissionDecision, ToolCall, ToolResult
from chorus.permissions import PermissionAnswer, PermissionAsk
from chorus.policy._audit import AuditLog
from chorus.policy._escapes import (
    dev_socket_findings,
    glob_denied,
    in_dir,
    inline_download_findings,
    is_glob,
    local_address,
    segment_dirs,
    socket_targets,
    unknown_dir_segments,
)
from chorus.policy._flags import FlagAnswer, FlagBoard, PendingFlag
from chorus.policy._injection import (
    check_secret_values,
    check_shell_exfiltration,
    mark_untrusted,
    url_secret_leak,
)
from chorus.policy._model import PERMISSION_MODES, NetworkPolicy, PermissionMode, Policy
from chorus.policy._paths import PathContext, check_path, resolve_path
from chorus.policy._risk import (
    NETWORK_TOOLS,
    READ_TOOLS,
    WRITE_TOOLS,
    RiskAssessment,
    assess_shell,
    assess_tool,
    risk_outcome,
)
from chorus.policy._shell import (
    URL_PATTERN,
    ParsedCommand,
    Segment,
    ShellSyntaxError,
    check_allowed,
    check_denied,
    check_download_exec,
    is_script_runner,
    parse_command,
    urls_in,
)
from chorus.policy._wording import POLICY_MARK, denial_text, is_told

Outcome = Literal["allow", "deny", "ask"]
SecretSource = Iterable[str] | Callable[[], Iterable[str]]

# fmt: off
_PATH_KEYS = ("file_path", "path", "notebook_path", "filePath", "absolute_path", "dir_path",
              "directory", "target_file")
_WRITE_ALL = frozenset({"tee", "touch", "mkdir", "rm", "rmdir", "truncate", "shred", "unlink",
                        "mv"})
_WRITE_LAST = frozenset({"cp", "ln", "install"})
_WRITE_AFTER_FIRST = frozenset({"chmod", "chown", "chgrp"})
_READERS = frozenset({"cat", "head", "tail", "less", "more", "nl", "tac", "base64", "xxd", "od",
                      "strings", "source", ".", "cp", "diff", "cmp", "sha256sum", "md5sum"})
_READ_ONLY_COMMANDS = frozenset({"ls", "cat", "head", "tail", "wc", "grep", "rg", "pwd", "echo",
                                 "tree", "stat", "file", "which", "sort", "uniq", "diff", "find",
                                 "true", "test", "[", "printf", "date", "whoami", "env",
                                 "cd", "pushd", "popd"})
# fmt: on
#: Programs whose arguments are text, never files they read.
_DATA_ARGS = frozenset(
    {
        "echo",
        "printf",
        "cd",
        "pushd",
        "popd",
        "export",
        "set",
        "test",
        "[",
        "true",
        "false",
        ":",
        "kill",
        "sleep",
        "seq",
        "expr",
    }
)
_HARMLESS_WRAPPERS = frozenset({"command", "time", "nice", "env", "timeout"})
_READ_ONLY_GIT = frozenset({"status", "log", "diff", "show", "branch", "rev-parse", "ls-files"})
#: Claude Code's Bash tool refuses timeouts above 10 minutes unless configured otherwise.
_CLAUDE_MAX_TIMEOUT_MS = 600_000


@dataclass(frozen=True, slots=True)
class Verdict:
    """The engine's answer. ``rule`` names what decided (``filesystem.outside_roots``,
    ``shell.denied_command``, ``mode.plan``, ``risk.elevated`` ...)."""

    decision: Outcome
    reason: str
    rule: str
    risk: RiskAssessment | None = None
    updated_input: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Vote:
    """A second model's vote on a risky tool call (it can only make things stricter)."""

    decision: Literal["allow", "deny"]
    reason: str
    voter: str


#: Asks a second model about a risky call: (ask, the policy's verdict) → its vote.
SecondOpinion = Callable[[PermissionAsk, "Verdict"], Awaitable["Vote | None"]]


def _deny(rule: str, reason: str) -> Verdict:
    return Verdict("deny", reason, rule)


def shell_command_text(data: dict[str, Any]) -> str | None:
    """The command line of a shell tool call (``command`` / ``cmd``; argv lists joined)."""
    for key in ("command", "cmd"):
        value = data.get(key)
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return shlex.join(value)
        if isinstance(value, str) and value.strip():
            return value
    return None


def tool_paths(ask: PermissionAsk) -> list[str]:
    """Every file path a non-shell tool call names: input keys and Codex changes first
    (as the model wrote them, so a reason can name a symlink), then ``ask.paths``
    (which a CLI may already have resolved)."""
    found: list[str] = []
    for key in _PATH_KEYS:
        value = ask.input.get(key)
        if isinstance(value, str) and value:
            found.append(value)
    for key in ("paths", "changes", "diffs"):
        for item in ask.input.get(key) or ():
            value = item.get("path") if isinstance(item, dict) else item
            if isinstance(value, str) and value:
                found.append(value)
    return list(dict.fromkeys([*found, *ask.paths]))


@dataclass(frozen=True, slots=True)
class _ShellPaths:
    mentioned: list[str]
    reads: list[str]
    writes: list[str]


def _path_args(seg: Segment) -> list[str]:
    out: list[str] = []
    for arg in seg.argv[1:]:
        if arg.startswith("-"):
            value = arg.split("=", 1)[1] if "=" in arg else ""
        else:
            value = arg.split("=", 1)[1] if seg.name == "dd" and "=" in arg else arg
        value = value.lstrip("@")
        if value and not URL_PATTERN.match(value) and "\n" not in value:
            out.append(value)
    return out


def shell_paths(
    parsed: ParsedCommand, dirs: list[str | None] | None = None, cwd: str = ""
) -> _ShellPaths:
    """Paths a command line touches: every argument (checked against denied paths),
    what known readers read (and any other program's arguments that exist on disk),
    and what writers and ``>`` redirects write. ``dirs`` (from :func:`segment_dirs`)
    places each relative path in the folder its command runs in."""
    out = _ShellPaths([], [], [])
    for index, seg in enumerate(parsed.segments):
        folder = cwd if dirs is None else dirs[index]
        _segment_paths(seg, _Placer(folder, cwd), out)
    return out


@dataclass(frozen=True, slots=True)
class _Placer:
    folder: str | None
    cwd: str

    def __call__(self, raws: Iterable[str]) -> list[str]:
        placed = (in_dir(raw, self.folder, self.cwd) for raw in raws)
        return [p for p in placed if p is not None]


def _segment_paths(seg: Segment, place: _Placer, out: _ShellPaths) -> None:
    for redirect in seg.redirects:
        target = redirect.target
        if target.isdigit() or target == "-" or target.startswith("/dev/"):
            continue
        out.mentioned.extend(place([target]))
        (out.writes if redirect.writes else out.reads).extend(place([target]))
    if seg.group or not seg.argv or is_script_runner(seg):
        return
    out.mentioned.extend(place(_path_args(seg)))
    positional = [a for a in seg.argv[1:] if not a.startswith("-")]
    out.writes.extend(place(positional if seg.dynamic else _writes_of(seg, positional)))
    if seg.name in _READERS:
        out.reads.extend(place(positional[:-1] if seg.name == "cp" else positional))
    elif seg.name not in _DATA_ARGS:
        out.reads.extend(p for p in place(positional) if _exists(p, place.cwd))


def _exists(raw: str, cwd: str) -> bool:
    path = os.path.expanduser(raw)
    return os.path.lexists(path if os.path.isabs(path) else os.path.join(cwd, path))


def _writes_of(seg: Segment, positional: list[str]) -> list[str]:
    if seg.name in _WRITE_ALL:
        return positional
    if seg.name in _WRITE_LAST:
        return positional[-1:]
    if seg.name in _WRITE_AFTER_FIRST:
        return positional[1:]
    if seg.name == "dd":
        return [a[3:] for a in seg.argv[1:] if a.startswith("of=")]
    if seg.name == "sed" and any(a.startswith("-i") or a == "--in-place" for a in seg.argv):
        return positional[1:]
    return []


def is_read_only(parsed: ParsedCommand) -> bool:
    """True if every command only reads (plan mode may run it)."""
    for seg in parsed.segments:
        if any(r.writes and not r.target.startswith("/dev/") for r in seg.redirects):
            return False
    return all(_reads_only(seg) for seg in parsed.commands())


def _reads_only(seg: Segment) -> bool:
    if is_script_runner(seg):
        return True  # its script's commands are judged themselves
    if any(os.path.basename(w) not in _HARMLESS_WRAPPERS for w in seg.wrappers):
        return False
    if not seg.argv:
        return True  # a harmless launcher alone, e.g. `env` printing the environment
    if seg.name == "git":
        return len(seg.argv) > 1 and seg.argv[1] in _READ_ONLY_GIT
    if seg.name == "find":
        return not any(a in seg.argv for a in ("-exec", "-execdir", "-delete", "-ok"))
    return seg.name in _READ_ONLY_COMMANDS


def domain_matches(host: str, pattern: str) -> bool:
    """``example.com`` matches itself and its subdomains; ``*.example.com`` only subdomains."""
    host = host.lower().rstrip(".")
    if pattern.startswith("*."):
        return host.endswith(pattern[1:])
    return host == pattern or host.endswith("." + pattern)


def check_local(
    host: str, port: int | None, network: NetworkPolicy, gateway_ports: Iterable[int] = ()
) -> Verdict | None:
    """A deny verdict for a loopback, link-local or metadata host, or the gateway's
    port, unless ``network.allowed_domains`` names that host itself."""
    if host.strip("[]").lower() in network.allowed_domains:
        return None
    why = local_address(host, port, gateway_ports)
    return None if why is None else _deny("network.local_address", f"{why} (denied to tools)")


def check_url(
    url: str, network: NetworkPolicy, gateway_ports: Iterable[int] = ()
) -> Verdict | None:
    """A deny verdict if ``url``'s host is denied, not allowed or local, else ``None``."""
    try:
        parts = urlsplit(url)
        host, port = parts.hostname or "", parts.port
    except ValueError:
        host, port = "", None
    if not host:
        return _deny("network.bad_url", f"cannot tell the host of {url!r}")
    local = check_local(host, port, network, gateway_ports)
    if local is not None:
        return local
    denied = next((p for p in network.denied_domains if domain_matches(host, p)), None)
    if denied:
        return _deny("network.denied_domain", f"{host} matches the denied domain {denied!r}")
    allowed = network.allowed_domains
    if allowed and not any(domain_matches(host, p) for p in allowed):
        return _deny("network.not_allowed", f"{host} is not in network.allowed_domains")
    if url_secret_leak(url):
        return _deny("exfil.url_secret", f"the URL to {host} carries a secret-named parameter")
    return None


class PolicyEngine:
    """Pure decisions over one :class:`Policy` (the only I/O is resolving paths).

    ``cwd`` is used when an ask carries none; ``secrets`` (values, or a callable
    returning them) are looked for literally in every tool input.
    """

    def __init__(
        self,
        policy: Policy,
        *,
        cwd: Path | None = None,
        chorus_home: Path | None = None,
        secrets: SecretSource = (),
        gateway_ports: Iterable[int] = (DEFAULT_PORT,),
    ) -> None:
        self.policy = policy
        self._gateway_ports = tuple(gateway_ports)
        self._cwd = cwd
        self._chorus_home = chorus_home
        self._secrets = secrets

    def secret_values(self) -> list[str]:
        source = self._secrets
        return list(source() if callable(source) else source)

    @property
    def cwd(self) -> Path | None:
        """The folder asks without their own are placed in (the session's)."""
        return self._cwd

    def context(self, ask: PermissionAsk) -> PathContext:
        cwd = Path(ask.cwd) if ask.cwd else self._cwd
        return PathContext.current(cwd, self._chorus_home)

    def decide(
        self,
        ask: PermissionAsk,
        *,
        mode: PermissionMode | None = None,
        untrusted_context: bool = False,
    ) -> Verdict:
        """Decide one tool call (see the module docstring for the order of checks)."""
        mode = mode or self.policy.mode
        ctx = self.context(ask)
        parsed: ParsedCommand | None = None
        if ask.tool in ("shell",):
            parsed_or_verdict = self._parse_shell(ask)
            if isinstance(parsed_or_verdict, Verdict):
                return parsed_or_verdict
            parsed = parsed_or_verdict
        hard = self._hard_rules(ask, ctx, parsed)
        if hard is not None:
            return hard
        by_mode = self._mode_rules(ask, mode, parsed)
        if by_mode is not None:
            return by_mode
        return self._risk_rules(ask, ctx, mode, parsed, untrusted_context)

    # -- step 1: hard rules -----------------------------------------------------------

    def _parse_shell(self, ask: PermissionAsk) -> ParsedCommand | Verdict | None:
        command = shell_command_text(ask.input)
        if command is None:
            return Verdict(
                "ask", "the shell call carries no command Chorus can read", "shell.no_command"
            )
        try:
            return parse_command(command)
        except ShellSyntaxError as exc:
            if self.policy.shell.mode == "allowlist":
                return _deny("shell.unparsed", f"cannot analyse the command ({exc})")
            return self._unparsed(command, str(exc))

    def _unparsed(self, command: str, problem: str) -> Verdict:
        # Without a parse, fall back to words: a denied program name anywhere denies.
        words = command.replace("(", " ").replace(")", " ").replace(";", " ").split()
        for rule in self.policy.shell.denied_commands:
            head = shlex.split(rule)[0].casefold()
            if " " not in rule and any(w.casefold().endswith(head) for w in words):
                return _deny("shell.denied_command", f"the command mentions denied {rule!r}")
        return Verdict("ask", f"cannot analyse the command ({problem})", "shell.unparsed")

    def _hard_rules(
        self, ask: PermissionAsk, ctx: PathContext, parsed: ParsedCommand | None
    ) -> Verdict | None:
        secret_hits = check_secret_values(ask.input, self.secret_values())
        if secret_hits:
            return _deny(secret_hits[0].rule, secret_hits[0].reason)
        if parsed is not None:
            return self._shell_rules(parsed, ctx)
        if ask.tool in WRITE_TOOLS or ask.tool in READ_TOOLS:
            return self._path_rules(tool_paths(ask), ctx, write=ask.tool in WRITE_TOOLS)
        if ask.tool == "web_fetch":
            url = ask.input.get("url") or ask.input.get("prompt")
            return self._check_url(url) if isinstance(url, str) else None
        if ask.tool == "mcp":
            return self._mcp_rule(ask)
        return None

    def _path_rules(self, paths: Iterable[str], ctx: PathContext, *, write: bool) -> Verdict | None:
        fs = self.policy.filesystem
        for raw in paths:
            verdict = check_path(
                raw,
                ctx,
                allowed=fs.allowed_paths,
                read_only=fs.read_only_paths,
                denied=fs.denied_paths,
                write=write,
            )
            if not verdict.ok:
                return _deny(verdict.rule, verdict.reason)
        return None

    def _denied_only(self, paths: Iterable[str], ctx: PathContext) -> Verdict | None:
        fs = self.policy.filesystem
        for raw in paths:
            pattern = glob_denied(raw, ctx, fs.denied_paths) if is_glob(raw) else None
            if pattern is not None:
                reason = f"the glob {raw!r} can name the denied path {pattern!r}"
                return _deny("filesystem.denied_path", reason)
            verdict = check_path(
                raw, ctx, allowed=["/"], read_only=[], denied=fs.denied_paths, write=False
            )
            if not verdict.ok and verdict.rule == "filesystem.denied_path":
                return _deny(verdict.rule, verdict.reason)
        return None

    def _shell_rules(self, parsed: ParsedCommand, ctx: PathContext) -> Verdict | None:
        shell = self.policy.shell
        findings = dev_socket_findings(parsed)
        if shell.deny_download_exec:
            findings += check_download_exec(parsed) + inline_download_findings(parsed)
        if shell.mode != "unrestricted":
            findings += check_denied(parsed, shell.denied_commands)
        if shell.mode == "allowlist":
            findings += check_allowed(parsed, shell.allowed_commands)
        if findings:
            return _deny(findings[0].rule, findings[0].reason)
        network = self.policy.network
        exfil = check_shell_exfiltration(
            parsed,
            ctx,
            self.policy.filesystem.denied_paths,
            trusted_domain=lambda h: any(domain_matches(h, p) for p in network.allowed_domains),
        )
        if exfil:
            return _deny(exfil[0].rule, exfil[0].reason)
        paths = shell_paths(parsed, segment_dirs(parsed, str(ctx.cwd), str(ctx.home)), str(ctx.cwd))
        return (
            self._denied_only(paths.mentioned, ctx)
            or self._path_rules(paths.writes, ctx, write=True)
            or self._path_rules(paths.reads, ctx, write=False)
            or self._local_targets(parsed)
            or next((v for u in urls_in(parsed) if (v := self._check_url(u))), None)
        )

    def _check_url(self, url: str) -> Verdict | None:
        return check_url(url, self.policy.network, self._gateway_ports)

    def _local_targets(self, parsed: ParsedCommand) -> Verdict | None:
        for seg, host, port in socket_targets(parsed):
            verdict = check_local(host, port, self.policy.network, self._gateway_ports)
            if verdict is not None:
                return _deny(verdict.rule, f"`{seg.text}`: {verdict.reason}")
        return None

    def _mcp_rule(self, ask: PermissionAsk) -> Verdict | None:
        server = mcp_server(ask)
        allowed = self.policy.mcp.allowed_servers
        if server == CHORUS_MCP_SERVER:
            return None  # Chorus's own server: its tools check and audit themselves
        if "*" in allowed or (server is not None and server in allowed):
            return None
        name = server or "(unknown)"
        return _deny("mcp.not_allowed", f"MCP server {name!r} is not in mcp.allowed_servers")

    # -- step 2: mode -----------------------------------------------------------------

    def _mode_rules(
        self, ask: PermissionAsk, mode: PermissionMode, parsed: ParsedCommand | None
    ) -> Verdict | None:
        if mode == "bypassPermissions":
            return Verdict(
                "allow",
                "bypassPermissions: no asks; hard rules passed",
                "mode.bypass",
                self._assess(ask, self.context(ask), parsed, untrusted=False),
                updated_input=self._timeout_update(ask, parsed),
            )
        if mode != "plan" or ask.tool in READ_TOOLS or ask.tool in NETWORK_TOOLS:
            return None
        if ask.tool == "shell" and parsed is not None and is_read_only(parsed):
            return None
        return _deny("mode.plan", f"plan mode is read-only: {ask.tool} calls are not allowed")

    # -- step 3: risk -----------------------------------------------------------------

    def _risk_rules(
        self,
        ask: PermissionAsk,
        ctx: PathContext,
        mode: PermissionMode,
        parsed: ParsedCommand | None,
        untrusted: bool,
    ) -> Verdict:
        risk = self._assess(ask, ctx, parsed, untrusted)
        if ask.tool in WRITE_TOOLS and mode == "acceptEdits" and risk.level != "critical":
            return Verdict(
                "allow",
                "acceptEdits: file edits inside the allowed roots",
                "mode.accept_edits",
                risk,
            )
        outcome = risk_outcome(risk.level, self.policy.risk.authority)
        why = "; ".join(risk.reasons) or "no risk factors"
        reason = f"{risk.level} risk ({why})"
        update = self._timeout_update(ask, parsed) if outcome != "deny" else None
        unknown = self._unknown_dir(parsed, ctx) if outcome != "deny" else None
        if unknown is not None:
            return Verdict("ask", unknown, "shell.unknown_dir", risk, update)
        return Verdict(outcome, reason, f"risk.{risk.level}", risk, update)

    def _unknown_dir(self, parsed: ParsedCommand | None, ctx: PathContext) -> str | None:
        """Why the rest of a command line must be asked about: after ``cd "$X"``,
        ``cd -``, ``popd`` of nothing ... its folder is known only at run time, so its
        relative paths cannot be checked (whatever the risk authority says)."""
        if parsed is None:
            return None
        dirs = segment_dirs(parsed, str(ctx.cwd), str(ctx.home))
        blind = unknown_dir_segments(parsed, dirs)
        if not blind:
            return None
        return (
            f"`{blind[0].text}` runs in a folder known only at run time "
            "(after a directory change Chorus cannot follow), so its paths cannot be checked"
        )

    def _assess(
        self, ask: PermissionAsk, ctx: PathContext, parsed: ParsedCommand | None, untrusted: bool
    ) -> RiskAssessment:
        env = self.policy.risk.environment
        if parsed is not None:
            dirs = segment_dirs(parsed, str(ctx.cwd), str(ctx.home))
            unknown = bool(unknown_dir_segments(parsed, dirs))
            return assess_shell(
                parsed, environment=env, untrusted_context=untrusted, unknown_dir=unknown
            )
        if ask.tool == "shell":  # no readable command: treat it as elevated
            return RiskAssessment("elevated", {"blast_radius": 2}, ("unreadable shell call",))
        writes = tool_paths(ask) if ask.tool in WRITE_TOOLS else []
        outside = any(not _under_cwd(p, ctx) for p in writes)
        return assess_tool(
            ask.tool,
            environment=env,
            write_paths=writes,
            outside_cwd=outside,
            untrusted_context=untrusted,
        )

    def _timeout_update(
        self, ask: PermissionAsk, parsed: ParsedCommand | None
    ) -> dict[str, Any] | None:
        """Claude's Bash takes ``timeout`` (ms): cap it at the policy's per-command limit."""
        if ask.native_tool != "Bash" or parsed is None:
            return None
        shell = self.policy.shell
        names = [s.name for s in parsed.commands()] or [""]
        limit_ms = int(min(max(shell.timeout_for(n) for n in names) * 1000, _CLAUDE_MAX_TIMEOUT_MS))
        requested = ask.input.get("timeout")
        if isinstance(requested, int | float) and 0 < requested <= limit_ms:
            return None
        return {**ask.input, "timeout": limit_ms}


def _under_cwd(raw: str, ctx: PathContext) -> bool:
    try:
        real = resolve_path(raw, ctx).real
    except ValueError:
        return False
    cwd = resolve_path(str(ctx.cwd), ctx).real
    return real == cwd or cwd in real.parents


#: The name under which Chorus adds its own MCP server to every body (``chorus mcp``).
CHORUS_MCP_SERVER = "chorus"


def mcp_server(ask: PermissionAsk) -> str | None:
    """The MCP server of a tool call: ``mcp__<server>__<tool>``, an input ``server``
    field, or Gemini's ACP title ``"<tool> (<server> MCP Server)"``."""
    if ask.native_tool.startswith("mcp__"):
        parts = ask.native_tool.split("__")
        return parts[1] if len(parts) >= 3 else None
    server = ask.input.get("server") or ask.input.get("server_name")
    if isinstance(server, str):
        return server
    title = ask.input.get("title")
    match = _GEMINI_MCP_TITLE.search(title) if isinstance(title, str) else None
    return match.group(1) if match and ask.native_tool.startswith("mcp_") else None


_GEMINI_MCP_TITLE = re.compile(r"\(([^()]+) MCP Server\)$")


# -- the gate -------------------------------------------------------------------------

FlagHook = Callable[[PendingFlag], Awaitable[None] | None]
AnswerHook = Callable[[PermissionAsk, PermissionAnswer], Awaitable[None] | None]


class PolicyGate:
    """A body's permission callback backed by the engine, the audit log and flags.

    Call it with a :class:`PermissionAsk`; it never raises for a policy outcome.
    ``mode`` may be changed at any time (``set_permission_mode``). Feed it the
    session's events through :meth:`observe` so tool results are scanned for
    injection and tool calls are audited.

    Telling the model why: Claude carries a denial's message in the tool result.
    Codex's ``decline`` and ACP's ``reject_once`` carry none, so for those bodies
    the caller delivers the reason itself: ``on_answer`` runs before the answer
    is returned (steering it into a Codex turn there lands in the very next
    model request), and :meth:`take_denials` hands over the messages not yet
    delivered (to prepend to the next prompt, e.g. for Gemini, whose turn ends
    at a rejection).
    """

    def __init__(
        self,
        engine: PolicyEngine,
        audit: AuditLog | None,
        *,
        flags: FlagBoard | None = None,
        mode: PermissionMode | None = None,
        session_id: str | None = None,
        on_flag: FlagHook | None = None,
        on_answer: AnswerHook | None = None,
    ) -> None:
        self.engine = engine
        self.on_answer = on_answer
        #: Refusal messages not yet handed over: ``(message, told)``; ``told`` when
        #: the body carried it in the tool result (the callback's answer).
        self._denials: list[tuple[str, bool]] = []
        self.audit = audit
        self.flags = flags or FlagBoard(redactor=audit.redactor if audit else None)
        self._mode: PermissionMode = mode or engine.policy.mode
        self.session_id = session_id
        #: The job this gate decides for (set by the daemon's supervisor): what the
        #: gate's session says about the job, e.g. a downgraded mode, is the job's.
        self.job_id: str | None = None
        self.on_flag = on_flag
        #: Set to have a second model vote on elevated or critical calls.
        self.second_opinion: SecondOpinion | None = None
        self.tainted = False
        self._tools: dict[str, str] = {}
        self._calls: dict[str, ToolCall] = {}
        self._decided: set[str] = set()  # call ids this gate answered

    @property
    def native_mode(self) -> str:
        """The mode the CLI itself runs in under this gate: ``plan`` stays read-only,
        anything else is ``default`` so that every tool call reaches the gate."""
        return "plan" if self._mode == "plan" else "default"

    @property
    def mode(self) -> PermissionMode:
        return self._mode

    @mode.setter
    def mode(self, value: str) -> None:
        if value not in PERMISSION_MODES:
            raise ValueError(f"unknown permission mode {value!r}; expected {PERMISSION_MODES}")
        self._mode = value

    async def __call__(self, ask: PermissionAsk) -> PermissionAnswer:
        if ask.call_id:
            self._decided.add(ask.call_id)
        verdict = self.engine.decide(ask, mode=self._mode, untrusted_context=self.tainted)
        verdict = await self._second_look(ask, verdict)
        if verdict.decision != "ask":
            self._audit_decision(ask, verdict, verdict.decision, "policy")
            return await self._settle(ask, self._answer(ask, verdict, verdict.decision))
        flag = await self._ask_person(ask, verdict)
        self._audit_decision(ask, verdict, flag.decision, flag.source, flag=flag.id)
        return await self._settle(ask, self._answer(ask, verdict, flag.decision, flag=flag))

    async def _settle(self, ask: PermissionAsk, answer: PermissionAnswer) -> PermissionAnswer:
        if answer.decision == "deny" and answer.reason:
            self._denials.append((answer.reason, True))
        if self.on_answer is not None:
            result = self.on_answer(ask, answer)
            if inspect.isawaitable(result):
                await result
        return answer

    async def _second_look(self, ask: PermissionAsk, verdict: Verdict) -> Verdict:
        """A second model votes on an elevated or critical call the policy did not deny;
        its deny makes the verdict a deny, its allow changes nothing."""
        risk = self._risk_of(ask, verdict)
        hook = self.second_opinion
        if hook is None or verdict.decision == "deny" or risk is None:
            return verdict
        if not risk.at_least("elevated"):
            return verdict
        vote = await hook(ask, verdict)
        self._append("second_opinion", _vote_data(ask, verdict, vote))
        if vote is None or vote.decision == "allow":
            return verdict
        reason = f"second opinion from {vote.voter}: {vote.reason}"
        return Verdict("deny", reason, "second_opinion", risk)

    def _risk_of(self, ask: PermissionAsk, verdict: Verdict) -> RiskAssessment | None:
        """The verdict's risk, or (when the mode skipped scoring, e.g. bypass) the risk
        the default mode would have scored."""
        if verdict.risk is not None or self.second_opinion is None:
            return verdict.risk
        return self.engine.decide(ask, mode="default", untrusted_context=self.tainted).risk

    def take_denials(self, *, told: bool = False) -> list[str]:
        """Refusal messages since the last call (oldest first), then forgets them.
        ``told``: the body carries the callback's answer to the model (Claude), so
        only the refusals found after the fact (:meth:`refusal`) are left to tell."""
        taken, self._denials = self._denials, []
        return [message for message, answered in taken if not (told and answered)]

    def refusal(self, result: ToolResult) -> PermissionDecision | None:
        """The policy's decision on a call that failed without this gate being asked:
        refused by the CLI's own rules, its sandbox or Chorus's (a one-shot body, a
        call a CLI approves or refuses by itself). When the policy denies that call,
        the refusal is audited and returned with the policy's rule and reason (for
        the log); unless the tool result already carries it, it waits to be told
        (:meth:`take_denials`). ``None`` for anything else."""
        call = self._calls.pop(result.call_id, None)
        decided = result.call_id in self._decided
        self._decided.discard(result.call_id)
        refused = result.is_error or result.status in ("denied", "failed", "declined")
        if call is None or decided or not refused:
            return None
        ask = PermissionAsk(body=call.body, tool=call.tool, native_tool=call.native_tool,
                            input=dict(call.input), call_id=call.call_id)  # fmt: skip
        verdict = self.engine.decide(ask, mode=self._mode, untrusted_context=self.tainted)
        if verdict.decision != "deny":
            return None
        message = denial_text(verdict.rule, verdict.reason, call.tool)
        told = is_told(result.output, verdict.rule)
        if not told:
            self._denials.append((message, False))
        self._audit_decision(ask, verdict, "deny", "body", told=told)
        return PermissionDecision(
            request_id=call.call_id, decision="deny", reason=message, source="policy"
        )

    async def _ask_person(self, ask: PermissionAsk, verdict: Verdict) -> FlagAnswer:
        policy = self.engine.policy
        flag = self.flags.raise_flag(
            ask,
            reason=verdict.reason,
            default=policy.ask.default,
            timeout_s=policy.ask.timeout_s,
            session_id=self.session_id,
        )
        self._append(
            "flag_raised",
            {
                "flag": flag.id,
                "summary": flag.summary,
                "reason": flag.reason,
                "default": flag.default,
                "expires": flag.expires,
            },
        )
        if self.on_flag is not None:
            result = self.on_flag(flag)
            if inspect.isawaitable(result):
                await result
        answer = await self.flags.wait(flag)
        self._append(
            "flag_answered",
            {
                "flag": flag.id,
                "decision": answer.decision,
                "source": answer.source,
                "note": answer.note,
            },
        )
        return answer

    def _answer(
        self, ask: PermissionAsk, verdict: Verdict, decision: str, *, flag: FlagAnswer | None = None
    ) -> PermissionAnswer:
        if decision == "allow":
            return PermissionAnswer(
                "allow", reason=verdict.reason, updated_input=verdict.updated_input
            )
        return PermissionAnswer.deny(_denial_message(ask, verdict, flag))

    def _audit_decision(
        self,
        ask: PermissionAsk,
        verdict: Verdict,
        decision: str,
        source: str,
        *,
        flag: str | None = None,
        told: bool | None = None,
    ) -> None:
        """``source``: ``policy`` (this gate), ``body`` (refused by the body, judged
        after the fact), or who answered a flag."""
        denial = decision == "deny" and source in ("policy", "body")
        kind = "policy_denial" if denial else "permission_decision"
        risk = verdict.risk
        self._append(
            kind,
            {
                "body": ask.body,
                "tool": ask.tool,
                "native_tool": ask.native_tool,
                "call_id": ask.call_id,
                "input": ask.input,
                "cwd": ask.cwd,
                "mode": self._mode,
                "decision": decision,
                "source": source,
                "rule": verdict.rule,
                "reason": verdict.reason,
                "flag": flag,
                "risk": None if risk is None else {"level": risk.level, "factors": risk.factors},
                **({} if told is None else {"told": told}),
            },
        )

    def _append(self, kind: str, data: dict[str, Any]) -> None:
        if self.audit is not None:
            self.audit.append(kind, data, session_id=self.session_id)

    def observe(self, event: Event) -> Event:
        """Watch one session event: audit tool calls; scan tool results for injection
        and return them marked ``untrusted`` (the caller logs the returned event).
        One untrusted result taints the session: later network calls score higher."""
        if isinstance(event, ToolCall):
            self._tools[event.call_id] = event.tool
            self._calls[event.call_id] = event
            if self.audit is not None:
                self.audit.record_event(self._stamped(event))
            return event
        if isinstance(event, ToolResult):
            marked = mark_untrusted(event, tool=self._tools.get(event.call_id))
            if marked.untrusted and not self.tainted:
                self.tainted = True
                self._append(
                    "untrusted_content",
                    {"call_id": event.call_id, "tool": self._tools.get(event.call_id)},
                )
            return marked
        if isinstance(event, PermissionDecision) and event.source == "callback":
            return event  # this gate audited its own decision, with the rule and risk
        if self.audit is not None:
            self.audit.record_event(self._stamped(event))
        return event

    def _stamped(self, event: Event) -> Event:
        """The event with this gate's session (a body's events get theirs in the log)."""
        if event.session_id or not self.session_id:
            return event
        return event.model_copy(update={"session_id": self.session_id})


def _denial_message(ask: PermissionAsk, verdict: Verdict, flag: FlagAnswer | None) -> str:
    """What the model is told: enough to understand the denial and not retry blindly."""
    if flag is None:
        return denial_text(verdict.rule, verdict.reason, ask.tool)
    if flag.source == "timeout":
        return (
            f"{POLICY_MARK} Chorus asked a person about this {ask.tool} call "
            f"({verdict.reason}); no answer came in time and the default is deny "
            f"[flag {flag.id}]."
        )
    note = f": {flag.note}" if flag.note else ""
    return f"{POLICY_MARK} A person denied this {ask.tool} call [flag {flag.id}]{note}."


def policy_callback(
    policy: Policy,
    audit: AuditLog | None,
    *,
    mode: PermissionMode | None = None,
    cwd: Path | None = None,
    flags: FlagBoard | None = None,
    session_id: str | None = None,
    secrets: SecretSource = (),
    on_flag: FlagHook | None = None,
    on_answer: AnswerHook | None = None,
    chorus_home: Path | None = None,
) -> PolicyGate:
    """A :data:`PermissionCallback` that enforces ``policy`` and writes ``audit``.

    ``mode`` overrides ``policy.mode`` for this session; ``cwd`` is the session's
    working directory (used when an ask carries none); ``secrets`` are stored
    secret values (or a callable returning them) that must never appear in a
    tool input; ``on_flag`` is told about every flag raised (e.g. to emit a
    ``Flag`` event); ``on_answer`` sees every answer before the body does (see
    :class:`PolicyGate` for delivering denial reasons). The returned gate is also
    where ``set_permission_mode`` lands (``gate.mode = ...``) and where session
    events go (``gate.observe``).
    """
    engine = PolicyEngine(policy, cwd=cwd, chorus_home=chorus_home, secrets=secrets)
    return PolicyGate(
        engine,
        audit,
        flags=flags,
        mode=mode,
        session_id=session_id,
        on_flag=on_flag,
        on_answer=on_answer,
    )


def _vote_data(ask: PermissionAsk, verdict: Verdict, vote: Vote | None) -> dict[str, Any]:
    return {
        "body": ask.body,
        "tool": ask.tool,
        "input": ask.input,
        "policy": verdict.decision,
        "vote": vote.decision if vote else None,
        "voter": vote.voter if vote else None,
        "reason": vote.reason if vote else "no vote (the voter failed or timed out)",
    }
