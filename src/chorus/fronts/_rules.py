"""Where each front's client is asked: the permission rules of the CLI the client
thinks it drives, applied to the calls Chorus's policy allowed (sans-I/O).

Chorus's policy decides first (its deny is final); a front reviews every call the
policy lets through (UCP ``review_calls``) and puts to its client exactly the calls
the client's own CLI would have put to it:

* :class:`ClaudeRules` (``chorus-claude``, and ``chorus acp`` whose modes are Claude
  Code's): Claude Code 2.1's permission mode, ``--allowedTools`` and
  ``--disallowedTools``. Reading inside the working folders, and shell commands that
  only read there, pass; so do edits there under ``acceptEdits`` (file-system shell
  commands too); everything else asks (observed against Claude Code 2.1.330).
* :class:`CodexRules` (``chorus codex-app-server``): the thread's ``approvalPolicy``
  and sandbox, as ``codex app-server`` applies them.

:func:`shell_reach` classifies a command line for both.
"""

from __future__ import annotations

import fnmatch
import os
import re
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal
from urllib.parse import urlsplit

from chorus.events import JsonDict
from chorus.policy import ParsedCommand, Segment, ShellSyntaxError, parse_command

Decision = Literal["allow", "ask", "deny"]
#: What a command line reaches: ``read`` (only reads inside the roots), ``edit`` (also
#: changes files inside them, with file-system commands only), ``other``.
Reach = Literal["read", "edit", "other"]

#: Chorus's tool vocabulary -> Claude Code's tool names (what SDK callbacks expect).
CLAUDE_TOOLS = {
    "shell": "Bash",
    "shell_output": "BashOutput",
    "shell_kill": "KillShell",
    "read": "Read",
    "write": "Write",
    "edit": "Edit",
    "delete": "Edit",
    "move": "Edit",
    "search": "Grep",
    "glob": "Glob",
    "list": "LS",
    "web_fetch": "WebFetch",
    "web_search": "WebSearch",
    "todo": "TodoWrite",
    "task": "Task",
    "ask_user": "AskUserQuestion",
}
#: Claude Code tools that never ask.
FREE_TOOLS = frozenset({"TodoWrite", "Task", "Agent", "BashOutput", "KillShell", "think"})
READ_TOOLS = frozenset({"Read", "Grep", "Glob", "LS", "NotebookRead"})
EDIT_TOOLS = frozenset({"Write", "Edit", "MultiEdit", "NotebookEdit"})
PATH_KEYS = ("file_path", "path", "notebook_path", "absolute_path", "dir_path")

#: Commands that only read (their path arguments must be inside the roots).
READ_COMMANDS = frozenset({
    "ls", "cat", "head", "tail", "wc", "grep", "egrep", "fgrep", "rg", "pwd", "echo",
    "printf", "tree", "stat", "file", "which", "sort", "uniq", "diff", "cmp", "comm", "find",
    "true", "false", "test", "[", "date", "whoami", "sleep", "basename", "dirname",
    "realpath", "readlink", "cut", "tr", "nl", "du", "df", "id", "uname", "seq", "cd",
    "md5sum", "sha1sum", "sha256sum", "tac", "rev", "column", "fold", "od", "xxd",
    "hostname", "jq",
})  # fmt: skip
#: Commands whose arguments are text, not paths.
TEXT_COMMANDS = frozenset({"echo", "printf", "true", "false", "sleep", "seq", "test", "["})
#: Commands whose first positional argument is a pattern or a script, not a path.
PATTERN_FIRST = frozenset({"grep", "egrep", "fgrep", "rg", "sed", "jq"})
READ_GIT = frozenset({"status", "log", "diff", "show", "rev-parse", "ls-files", "blame"})
#: What ``acceptEdits`` also lets a shell command do inside the roots.
EDIT_COMMANDS = frozenset({"mkdir", "touch", "rm", "rmdir", "mv", "cp", "sed"})
FIND_ACTIONS = frozenset({"-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fls"})
#: A ``sed`` script that only prints: ``Np``, ``N,Md``, ``s/a/b/g`` ...
SED_PRINT = re.compile(r"^(\d+|\$)?(,(\d+|\$))?[pd]$|^s(.)(?:(?!\4).)*\4(?:(?!\4).)*\4[gip0-9]*$")
SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh"})
NETWORK_COMMANDS = frozenset({"curl", "wget", "ssh", "scp", "rsync", "nc", "git-remote"})


# -- paths and shell command lines --------------------------------------------------------


@dataclass(frozen=True)
class Roots:
    """The working folders: the session's folder and the added ones."""

    cwd: str
    extra: tuple[str, ...] = ()

    def inside(self, raw: str, base: str | None = None) -> bool:
        """Whether ``raw`` (relative to ``base``, else the cwd) is in a root (links
        followed: a link inside pointing outside is outside)."""
        path = os.path.expanduser(raw)
        if not os.path.isabs(path):
            path = os.path.join(base or self.cwd, path)
        real = os.path.realpath(path)
        return any(_under(real, os.path.realpath(root)) for root in (self.cwd, *self.extra))

    def relative(self, raw: str) -> str:
        path = os.path.realpath(os.path.join(self.cwd, os.path.expanduser(raw)))
        return os.path.relpath(path, os.path.realpath(self.cwd))


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def unwrap_shell(command: str) -> str:
    """``bash -lc 'SCRIPT'`` (Codex's form) -> ``SCRIPT``; anything else unchanged."""
    try:
        words = shlex.split(command)
    except ValueError:
        return command
    if len(words) == 3 and os.path.basename(words[0]) in SHELLS and words[1] in {"-c", "-lc"}:
        return words[2]
    return command


def shell_reach(command: str, roots: Roots, base: str | None = None) -> Reach:
    """How far ``command`` reaches (``other`` when it cannot be parsed)."""
    try:
        parsed = parse_command(command)
    except ShellSyntaxError:
        return "other"
    runners = {s.parent for s in parsed.segments if s.origin.startswith("shell")}
    reaches: list[Reach] = []
    for index, seg in enumerate(parsed.segments):
        if index in runners or seg.group:
            continue
        reaches.append(_segment_reach(seg, roots, base))
    return _widest(reaches)


def _widest(reaches: Iterable[Reach]) -> Reach:
    seen = set(reaches)
    if "other" in seen:
        return "other"
    return "edit" if "edit" in seen else "read"


def _segment_reach(seg: Segment, roots: Roots, base: str | None) -> Reach:
    if seg.wrappers or seg.dynamic or (not seg.argv and not seg.redirects):
        return "other" if seg.wrappers or seg.dynamic else "read"
    redirect = _redirect_reach(seg, roots, base)
    if redirect == "other" or not seg.argv:
        return redirect
    if not all(roots.inside(path, base) for path in _path_args(seg, base or roots.cwd)):
        return "other"
    return _widest((redirect, _command_reach(seg)))


def _redirect_reach(seg: Segment, roots: Roots, base: str | None) -> Reach:
    reach: Reach = "read"
    for redirect in seg.redirects:
        target = redirect.target
        if target.isdigit() or target == "-" or target.startswith("/dev/"):
            continue
        if not roots.inside(target, base):
            return "other"
        if redirect.writes:
            reach = "edit"
    return reach


def _command_reach(seg: Segment) -> Reach:
    name, args = seg.name, seg.argv[1:]
    if name == "git":
        return "read" if args and args[0] in READ_GIT else "other"
    if name == "find":
        return "other" if FIND_ACTIONS & set(args) else "read"
    if name == "sed":
        in_place = any(a.startswith("-i") or a == "--in-place" for a in args)
        script = next((a for a in args if not a.startswith("-")), "")
        if in_place:
            return "edit"
        return "read" if SED_PRINT.match(script) else "other"
    if name in READ_COMMANDS:
        return "read"
    return "edit" if name in EDIT_COMMANDS else "other"


def _path_args(seg: Segment, folder: str) -> list[str]:
    """The arguments that name files: every positional one that looks like a path or
    exists (a pattern's or a script's excepted)."""
    if seg.name in TEXT_COMMANDS or seg.name == "git":
        return []
    positional = [a for a in seg.argv[1:] if not a.startswith("-")]
    if seg.name == "find":
        positional = _find_roots(seg.argv[1:])
    elif seg.name in PATTERN_FIRST:
        positional = positional[1:]
    return [a for a in positional if _looks_like_path(a, folder)]


def _find_roots(args: Sequence[str]) -> list[str]:
    roots: list[str] = []
    for arg in args:
        if arg.startswith("-") or arg in {"(", "!"}:
            break
        roots.append(arg)
    return roots


def _looks_like_path(arg: str, folder: str) -> bool:
    special = "/" in arg or arg.startswith("~") or arg in {".", ".."}
    return special or os.path.lexists(os.path.join(folder, arg))


# -- Claude Code ------------------------------------------------------------------------


def claude_tool(tool: str, native: str) -> str:
    """The Claude Code name of a call (``mcp__server__tool`` for MCP tools)."""
    if native.startswith("mcp__"):
        return native
    if tool == "mcp" or native.startswith("mcp_"):
        return "mcp__" + native.removeprefix("mcp_").replace("_", "__", 1)
    if native in CLAUDE_TOOLS.values() or native in FREE_TOOLS | READ_TOOLS | EDIT_TOOLS:
        return native
    return CLAUDE_TOOLS.get(tool, native)


def claude_input(tool: str, given: JsonDict) -> JsonDict:
    """The call's input as Claude Code's tool would take it (the native keys kept):
    ``command`` for Bash (Codex's ``bash -lc`` unwrapped), ``file_path`` for files."""
    shaped = dict(given)
    command = given.get("command") or given.get("cmd")
    if tool == "Bash" and isinstance(command, list):
        command = shlex.join(str(part) for part in command)
    if tool == "Bash" and isinstance(command, str):
        shaped["command"] = unwrap_shell(command)
    paths = input_paths(given)
    if tool != "Bash" and paths and "file_path" not in shaped:
        shaped["file_path"] = paths[0]
    return shaped


def input_paths(given: JsonDict) -> list[str]:
    """The file paths a call's input names (Codex's ``changes`` included)."""
    found = [str(given[key]) for key in PATH_KEYS if isinstance(given.get(key), str)]
    for change in given.get("changes") or ():
        if isinstance(change, dict) and isinstance(change.get("path"), str):
            found.append(change["path"])
    return found


@dataclass(frozen=True)
class ToolRule:
    """One ``--allowedTools`` / ``--disallowedTools`` entry: ``Tool`` or ``Tool(spec)``."""

    tool: str
    spec: str | None = None

    @classmethod
    def parse(cls, text: str) -> ToolRule:
        text = text.strip()
        if text.endswith(")") and "(" in text:
            name, _, spec = text[:-1].partition("(")
            return cls(name.strip(), spec.strip())
        return cls(text)

    def matches(self, tool: str, given: JsonDict, roots: Roots) -> bool:
        if self.tool.startswith("mcp__"):
            return fnmatch.fnmatchcase(tool, self.tool) or tool.startswith(self.tool + "__")
        if self.tool != tool:
            return False
        if self.spec is None or self.spec in {"", "*"}:
            return True
        if tool == "Bash":
            return self._command(str(given.get("command", "")))
        if tool in {"WebFetch", "WebSearch"}:
            return self._domain(str(given.get("url", "")))
        return any(self._path(path, roots) for path in input_paths(given))

    def _command(self, command: str) -> bool:
        spec = self.spec or ""
        pattern = spec[:-2].rstrip() + "*" if spec.endswith(":*") else spec
        try:
            parsed = parse_command(command)
        except ShellSyntaxError:
            return False
        if _writes_a_file(parsed):
            return False  # a rule names a command, not where its output goes
        parts = _command_texts(parsed) or [command]
        return all(fnmatch.fnmatchcase(part, pattern) for part in parts)

    def _domain(self, url: str) -> bool:
        spec = self.spec or ""
        host = urlsplit(url).hostname or ""
        wanted = spec.removeprefix("domain:")
        return host == wanted or host.endswith("." + wanted.lstrip("*."))

    def _path(self, path: str, roots: Roots) -> bool:
        spec = self.spec or ""
        if spec.startswith("//"):
            return fnmatch.fnmatchcase(os.path.realpath(path), spec[1:])
        if spec.startswith("~"):
            return fnmatch.fnmatchcase(os.path.realpath(path), os.path.expanduser(spec))
        return fnmatch.fnmatchcase(roots.relative(path), spec.removeprefix("./"))


def _writes_a_file(parsed: ParsedCommand) -> bool:
    redirects = (r for seg in parsed.segments for r in seg.redirects)
    return any(r.writes and not r.target.startswith("/dev/") for r in redirects)


def _command_texts(parsed: ParsedCommand) -> list[str]:
    runners = {s.parent for s in parsed.segments if s.origin.startswith("shell")}
    return [
        shlex.join(s.words)
        for i, s in enumerate(parsed.segments)
        if i not in runners and not s.group and s.words
    ]


@dataclass(frozen=True)
class RuleVerdict:
    decision: Decision
    reason: str = ""


@dataclass
class ClaudeRules:
    """Claude Code's own answer to a call before its client is asked."""

    roots: Roots
    mode: str = "default"
    allowed: list[ToolRule] = field(default_factory=list)
    disallowed: list[ToolRule] = field(default_factory=list)

    @classmethod
    def of(
        cls, cwd: str, mode: str | None, allowed: Sequence[str] = (), **more: Sequence[str]
    ) -> ClaudeRules:
        """From the command line's values (``disallowed=``, ``dirs=``)."""
        return cls(
            roots=Roots(cwd, tuple(more.get("dirs", ()))),
            mode=mode or "default",
            allowed=[ToolRule.parse(r) for r in allowed],
            disallowed=[ToolRule.parse(r) for r in more.get("disallowed", ())],
        )

    def allow_always(self, tool: str, given: JsonDict) -> None:
        """The client said "always allow": Claude Code's rule for it from now on."""
        command = given.get("command")
        spec = command if tool == "Bash" and isinstance(command, str) else None
        self.allowed.append(ToolRule(tool, spec))

    def decide(self, tool: str, given: JsonDict, base: str | None = None) -> RuleVerdict:
        """``allow`` or ``deny`` without asking, or ``ask`` the client."""
        if any(rule.matches(tool, given, self.roots) for rule in self.disallowed):
            return RuleVerdict("deny", f"{tool} is disallowed here (disallowedTools)")
        if self.mode == "bypassPermissions" or self._free(tool, given, base):
            return RuleVerdict("allow")
        if any(rule.matches(tool, given, self.roots) for rule in self.allowed):
            return RuleVerdict("allow")
        if self.mode == "dontAsk":
            return RuleVerdict("deny", f"{tool} needs approval and the mode is dontAsk")
        return RuleVerdict("ask")

    def _free(self, tool: str, given: JsonDict, base: str | None) -> bool:
        if tool in FREE_TOOLS:
            return True
        inside = all(self.roots.inside(path, base) for path in input_paths(given))
        if tool in READ_TOOLS:
            return inside
        if tool in EDIT_TOOLS:
            return inside and self.mode == "acceptEdits"
        if tool != "Bash" or not isinstance(given.get("command"), str):
            return False
        reach = shell_reach(given["command"], self.roots, base)
        return reach == "read" or (reach == "edit" and self.mode == "acceptEdits")


# -- Codex app-server ---------------------------------------------------------------------


@dataclass
class CodexRules:
    """When ``codex app-server`` sends its client an approval request."""

    roots: Roots
    approval: str = "on-request"
    sandbox: str = "read-only"
    #: The reviewer is ``auto_review`` (the server decides) or ``user``.
    reviewer: str = "user"
    #: Commands the client accepted "for session".
    accepted: set[str] = field(default_factory=set)

    @property
    def asks_client(self) -> bool:
        return self.approval != "never" and self.reviewer != "auto_review"

    def needs_approval(self, tool: str, given: JsonDict, base: str | None = None) -> bool:
        if not self.asks_client:
            return False
        command = given.get("command")
        if tool == "shell" and isinstance(command, str):
            return self._command(unwrap_shell(command), base)
        if tool in {"write", "edit", "delete", "move"}:
            return self._edit(input_paths(given), base)
        if tool in {"read", "search", "glob", "list", "todo", "think"}:
            return False
        return self.approval == "untrusted" or self.sandbox != "danger-full-access"

    def _command(self, command: str, base: str | None) -> bool:
        if command in self.accepted:
            return False
        reach = shell_reach(command, self.roots, base)
        if self.approval == "untrusted":
            return reach != "read"
        if self.sandbox == "danger-full-access":
            return False
        if self.sandbox == "read-only":
            return reach != "read"
        return reach == "other" and _leaves_workspace(command, self.roots, base)

    def _edit(self, paths: list[str], base: str | None) -> bool:
        if self.approval == "untrusted" or self.sandbox == "read-only":
            return True
        if self.sandbox == "danger-full-access":
            return False
        return not all(self.roots.inside(path, base) for path in paths)


def _leaves_workspace(command: str, roots: Roots, base: str | None) -> bool:
    """Under ``workspace-write`` Codex asks when a command needs more than its
    sandbox: the network, or a write outside the workspace."""
    try:
        parsed = parse_command(command)
    except ShellSyntaxError:
        return True
    for seg in parsed.commands():
        if seg.name in NETWORK_COMMANDS or seg.wrappers:
            return True
        targets = [r.target for r in seg.redirects if r.writes]
        if not all(roots.inside(t, base) for t in targets if not t.startswith("/dev/")):
            return True
        paths = _path_args(seg, base or roots.cwd)
        if seg.name in EDIT_COMMANDS and not all(roots.inside(p, base) for p in paths):
            return True
    return False
