"""Heuristic risk of one tool call: five factors, one level.

Each factor is scored 0..3 from what the call would do:

* ``irreversibility``: can it be undone (``rm -rf``, ``git push --force``, ``mkfs``)?
* ``blast_radius``: how much can it touch (recursive, ``/``, a shared remote, a deploy)?
* ``privilege``: does it raise or change privileges (``sudo``, ``chmod u+s``, ``/etc``)?
* ``network``: does it send data out (uploads, raw sockets, ``scp``)?
* ``environment``: is it aimed at production (``policy.risk.environment = "prod"``,
  ``--context prod``)?

The level is the highest of the first four (0 trivial, 1 normal, 2 elevated,
3 critical), raised one step when the environment factor is set and the call
does anything at all. What the level *does* depends on the policy's
``authority`` (:func:`risk_outcome`). The heuristics only ever add risk; they
never make a call that a rule denied acceptable.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

from chorus.policy._escapes import inline_code
from chorus.policy._model import Authority, Environment
from chorus.policy._shell import (
    FETCHERS,
    PRIVILEGE_WRAPPERS,
    ParsedCommand,
    Segment,
    is_script_runner,
)

RiskLevel = Literal["trivial", "normal", "elevated", "critical"]
LEVELS: tuple[RiskLevel, ...] = ("trivial", "normal", "elevated", "critical")
FACTORS = ("irreversibility", "blast_radius", "privilege", "network", "environment")

#: Tool categories (normalized tool names grouped by what they can do).
READ_TOOLS = frozenset({"read", "search", "glob", "list", "think", "todo", "ask_user", "task"})
WRITE_TOOLS = frozenset({"write", "edit", "delete", "move"})
SHELL_TOOLS = frozenset({"shell", "shell_input", "shell_output", "shell_kill"})
NETWORK_TOOLS = frozenset({"web_fetch", "web_search"})

_ROOTISH = frozenset({"/", "/*", "~", "~/", "~/*", "$HOME", "${HOME}", "*", ".", "..", "/home"})
_SYSTEM_DIRS = ("/etc", "/usr", "/boot", "/bin", "/sbin", "/lib", "/var", "/sys", "/dev", "/System")
_PROD_WORDS = re.compile(r"(?<![A-Za-z])(prod|production|live)(?![A-Za-z])", re.IGNORECASE)
_PERSISTENCE = re.compile(
    r"(^|/)(\.bashrc|\.zshrc|\.profile|\.bash_profile|\.gitconfig|\.git/hooks/.*|\.git/config|"
    r"\.github/workflows/.*|\.gitlab-ci\.yml|crontab|\.ssh/authorized_keys)$"
)
_SQL_DESTROY = re.compile(r"\b(drop\s+(table|database|schema)|truncate\s+table)\b", re.IGNORECASE)

# fmt: off
_PRIVILEGED_ADMIN = frozenset({
    "mount", "umount", "useradd", "userdel", "usermod", "passwd", "visudo", "iptables", "nft",
    "ufw", "setcap", "insmod", "modprobe",
})
# fmt: on
# Commands by what they do: (names, factor, score). A command may hit several.
_COMMAND_FACTORS: tuple[tuple[frozenset[str], str, int], ...] = (
    (frozenset({"mkfs", "wipefs", "shred", "fdisk", "parted", "sfdisk"}), "irreversibility", 3),
    (frozenset({"truncate", "srm"}), "irreversibility", 2),
    (frozenset({"rm", "rmdir", "unlink", "mv"}), "irreversibility", 1),
    (_PRIVILEGED_ADMIN, "privilege", 3),
    (
        frozenset(
            {
                "chown",
                "chgrp",
                "systemctl",
                "service",
                "launchctl",
                "crontab",
                "chroot",
                "at",
                "batch",
            }
        ),
        "privilege",
        2,
    ),
    (frozenset({"nc", "ncat", "netcat", "socat", "telnet"}), "network", 2),
    (frozenset({"scp", "sftp", "ftp", "rsync", "rclone"}), "network", 2),
    (
        frozenset({"kubectl", "helm", "terraform", "pulumi", "ansible-playbook", "flyctl"}),
        "blast_radius",
        2,
    ),
)

# Subcommands that change shared state: (program, subcommand words, factor, score).
_SUBCOMMANDS: tuple[tuple[str, tuple[str, ...], str, int], ...] = (
    ("git", ("push",), "blast_radius", 2),
    ("git", ("reset", "--hard"), "irreversibility", 2),
    ("git", ("clean",), "irreversibility", 2),
    ("git", ("branch", "-D"), "irreversibility", 2),
    ("git", ("checkout", "--"), "irreversibility", 1),
    ("git", ("filter-branch",), "irreversibility", 3),
    ("npm", ("publish",), "blast_radius", 3),
    ("cargo", ("publish",), "blast_radius", 3),
    ("twine", ("upload",), "blast_radius", 3),
    ("gh", ("release",), "blast_radius", 2),
    ("docker", ("push",), "blast_radius", 3),
    ("docker", ("system", "prune"), "irreversibility", 2),
    ("kubectl", ("delete",), "irreversibility", 3),
    ("terraform", ("destroy",), "irreversibility", 3),
    ("terraform", ("apply",), "blast_radius", 3),
    ("helm", ("uninstall",), "irreversibility", 3),
)


@dataclass(frozen=True, slots=True)
class RiskAssessment:
    """Factor scores (0..3), the resulting level, and why."""

    level: RiskLevel
    factors: dict[str, int]
    reasons: tuple[str, ...] = ()

    @property
    def score(self) -> int:
        """Sum of the factors (for sorting and display; the level is what decides)."""
        return sum(self.factors.values())

    def at_least(self, level: RiskLevel) -> bool:
        return LEVELS.index(self.level) >= LEVELS.index(level)


@dataclass(slots=True)
class _Scores:
    factors: dict[str, int] = field(default_factory=lambda: dict.fromkeys(FACTORS, 0))
    reasons: list[str] = field(default_factory=list)

    def add(self, factor: str, score: int, reason: str) -> None:
        if score > self.factors[factor]:
            self.factors[factor] = score
        if score > 0 and reason not in self.reasons:
            self.reasons.append(reason)

    def result(self, environment: Environment) -> RiskAssessment:
        if environment != "dev":
            self.add("environment", 2 if environment == "prod" else 1, f"{environment} environment")
        peak = max(self.factors[f] for f in FACTORS[:4])
        bump = 1 if self.factors["environment"] >= 2 and peak >= 1 else 0
        level = LEVELS[min(3, peak + bump)]
        return RiskAssessment(level, dict(self.factors), tuple(self.reasons))


def assess_tool(
    tool: str,
    *,
    environment: Environment = "dev",
    write_paths: Iterable[str] = (),
    outside_cwd: bool = False,
    untrusted_context: bool = False,
) -> RiskAssessment:
    """Risk of a non-shell tool from its category and the paths it writes."""
    scores = _Scores()
    if tool in WRITE_TOOLS:
        scores.add("irreversibility", 2 if tool == "delete" else 1, f"{tool} changes files")
        for path in write_paths:
            if _PERSISTENCE.search(path):
                scores.add("privilege", 2, f"writes {path}, which runs code later")
        if outside_cwd:
            scores.add("blast_radius", 2, "writes outside the working directory")
    elif tool in NETWORK_TOOLS:
        scores.add("network", 2 if untrusted_context else 1, f"{tool} reaches the network")
    elif tool == "mcp":
        scores.add("blast_radius", 1, "an MCP tool can do anything its server allows")
    elif tool not in READ_TOOLS and tool not in SHELL_TOOLS:
        scores.add("blast_radius", 2, f"unknown tool kind {tool!r}")
    return scores.result(environment)


def assess_shell(
    parsed: ParsedCommand,
    *,
    environment: Environment = "dev",
    untrusted_context: bool = False,
    unknown_dir: bool = False,
) -> RiskAssessment:
    """Risk of a command line: every segment scored, the worst one counts.
    ``unknown_dir``: some command runs in a folder known only at run time."""
    scores = _Scores()
    if unknown_dir:
        scores.add("blast_radius", 2, "a command runs in a folder known only at run time")
    for seg in parsed.commands():
        if is_script_runner(seg):
            continue  # its script's segments are scored themselves
        _score_segment(seg, scores, untrusted_context)
        _score_indirection(seg, scores)
    if _PROD_WORDS.search(parsed.source):
        scores.add("environment", 2, "the command names a production target")
    return scores.result(environment)


def _score_segment(seg: Segment, scores: _Scores, untrusted: bool) -> None:
    name = seg.name
    args = seg.argv[1:]
    _privilege(seg, scores)
    family = name.split(".", 1)[0]  # mkfs.ext4 is mkfs
    for names, factor, score in _COMMAND_FACTORS:
        if name in names or family in names:
            scores.add(factor, score, f"`{name}` ({factor.replace('_', ' ')})")
    for program, words, factor, score in _SUBCOMMANDS:
        if name == program and _has_words(args, words):
            scores.add(factor, score, f"`{program} {' '.join(words)}`")
    _removal(seg, scores)
    _persistence(seg, scores)
    _recursion(seg, scores)
    _network(seg, scores, untrusted)
    _redirects(seg, scores)
    if name in {"dd"} and any(a.startswith("of=/dev/") for a in args):
        scores.add("irreversibility", 3, "`dd` onto a device")
    if any(_SQL_DESTROY.search(a) for a in args):
        scores.add("irreversibility", 3, "destructive SQL")


_AWK = frozenset({"awk", "gawk", "mawk", "nawk", "busybox-awk"})
_AWK_RUNS = re.compile(r"system\s*\(|\|\s*getline|getline\s*<|print[^;}]*\|")
#: git configuration keys that name a program git runs (matched whole, any case;
#: ``<x>`` is any subsection): setting one is running code later, in every git run
#: of that repository, Chorus's own included.
_GIT_PROGRAM_KEY = re.compile(
    r"(core\.(hookspath|fsmonitor|pager|editor|sshcommand|askpass|gitproxy"
    r"|alternaterefscommand)|sequence\.editor|pager\..+|alias\..+"
    r"|filter\..+\.(clean|smudge|process)|diff\.external|diff\..+\.(textconv|command)"
    r"|merge\..+\.driver|credential\.(.+\.)?helper|gpg\.(.+\.)?program"
    r"|gpg\.ssh\.defaultkeycommand|remote\..+\.(uploadpack|receivepack|vcs)"
    r"|uploadpack\.packobjectshook|protocol\.(.+\.)?allow|include\.path|includeif\..+\.path"
    r"|(difftool|mergetool|man|browser)\..+\.(cmd|path)|submodule\..+\.update"
    r"|hook\..+\.command|trailer\..+\.(command|cmd)|gc\.recentobjectshook"
    r"|sendemail\.(sendmailcmd|tocmd|cccmd))",
    re.IGNORECASE | re.DOTALL,
)
#: ``git`` options before the subcommand that take a separate value.
_GIT_VALUED = frozenset({"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--config-env"})
#: ``git config`` options that take a value (they are not the key).
_CONFIG_VALUED = frozenset({"-f", "--file", "--blob", "--type", "--default", "--comment"})
#: ``git config`` options that only read or remove.
_CONFIG_READS = frozenset(
    {"--get", "--get-all", "--get-regexp", "--get-urlmatch", "--get-color", "--get-colorbool",
     "-l", "--list", "--unset", "--unset-all", "--remove-section", "--rename-section"}
)  # fmt: skip
#: ``git config``'s subcommands (git 2.46) that only read or remove.
_CONFIG_READ_WORDS = frozenset({"get", "list", "unset", "remove-section", "rename-section"})


def _score_indirection(seg: Segment, scores: _Scores) -> None:
    """Code the policy cannot read: a program named at run time, inline interpreter
    code, awk's ``system()``, git configuration that runs commands."""
    if seg.dynamic:
        scores.add("blast_radius", 2, f"`{seg.text}`: the program name is computed at run time")
    if inline_code(seg) is not None:
        scores.add("blast_radius", 2, f"`{seg.name}` runs inline code")
    if seg.name in _AWK and any(_AWK_RUNS.search(a) for a in seg.argv[1:]):
        scores.add("blast_radius", 2, f"`{seg.name}` runs commands from its program")
    if seg.name == "git":
        _score_git_config(seg.argv, scores)
        _score_git_env(seg, scores)


def _score_git_config(argv: tuple[str, ...], scores: _Scores) -> None:
    """``git -c KEY=...``, ``git config KEY VALUE`` (or ``--edit``) with a key that
    names a program (:data:`_GIT_PROGRAM_KEY`): elevated."""
    given, rest = _git_globals(argv[1:])
    for key in given:
        if _GIT_PROGRAM_KEY.fullmatch(key):
            scores.add("blast_radius", 2, f"`git -c {key}` names a program git runs")
    written = _config_write(rest[1:]) if rest[:1] == ("config",) else None
    if written is not None and (written == "--edit" or _GIT_PROGRAM_KEY.fullmatch(written)):
        scores.add("blast_radius", 2, f"`git config {written}`: a program git will run later")


#: Environment variables that make git run a program (or read config that may).
_GIT_PROGRAM_ENV = re.compile(
    r"GIT_(EXTERNAL_DIFF|PAGER|EDITOR|SEQUENCE_EDITOR|SSH|SSH_COMMAND|ASKPASS|PROXY_COMMAND"
    r"|EXEC_PATH|CONFIG_PARAMETERS|CONFIG|CONFIG_GLOBAL|CONFIG_SYSTEM)=.*",
    re.DOTALL,
)
_GIT_CONFIG_KEY_ENV = re.compile(r"GIT_CONFIG_KEY_\d+=(.*)", re.DOTALL)


def _score_git_env(seg: Segment, scores: _Scores) -> None:
    """``GIT_PAGER=... git``, ``GIT_CONFIG_KEY_0=core.fsmonitor git``: the same,
    through the environment (assignments, or ``env``'s words)."""
    steps = zip(seg.views, seg.views[1:], strict=False)
    wrapped = (w for outer, inner in steps for w in outer[: -len(inner)])
    for word in {*seg.assignments, *wrapped}:
        key = _GIT_CONFIG_KEY_ENV.fullmatch(word)
        if _GIT_PROGRAM_ENV.fullmatch(word) or (key and _GIT_PROGRAM_KEY.fullmatch(key[1])):
            name = word.split("=", 1)[0]
            scores.add("blast_radius", 2, f"`{name}` makes git run a program")


def _git_globals(args: tuple[str, ...]) -> tuple[list[str], tuple[str, ...]]:
    """The keys ``git``'s own ``-c``/``--config-env`` set, and the words from the
    subcommand on."""
    keys: list[str] = []
    k = 0
    while k < len(args) and args[k].startswith("-"):
        arg, value = args[k], args[k + 1] if k + 1 < len(args) else ""
        if arg == "-c":
            keys.append(value.split("=", 1)[0])  # git splits -c at the first =
        elif arg == "--config-env" or arg.startswith("--config-env="):
            spec = value if arg == "--config-env" else arg.removeprefix("--config-env=")
            keys.append(spec.rsplit("=", 1)[0])  # ... and --config-env at the last
        k += 2 if arg in _GIT_VALUED else 1
    return keys, args[k:]


def _config_write(args: tuple[str, ...]) -> str | None:
    """The key ``git config args`` sets (``--edit`` for an edit), or None when it
    only reads or removes."""
    words: list[str] = []
    k = 0
    while k < len(args):
        arg = args[k]
        if arg in ("-e", "--edit"):
            return "--edit"
        if arg in _CONFIG_READS:
            return None
        if arg in _CONFIG_VALUED:
            k += 1
        elif not arg.startswith("-"):
            words.append(arg)
        k += 1
    return _written_key(words)


def _written_key(words: list[str]) -> str | None:
    """The key of ``git config``'s positional words when they set one."""
    first = words[0] if words else ""
    if first == "edit":
        return "--edit"
    if first in _CONFIG_READ_WORDS:
        return None
    words = words[1:] if first == "set" else words
    return words[0] if len(words) >= 2 else None


def _has_words(args: tuple[str, ...], words: tuple[str, ...]) -> bool:
    remaining = iter(args)
    return all(any(a == w for a in remaining) for w in words)


def _privilege(seg: Segment, scores: _Scores) -> None:
    wrappers = {os.path.basename(w) for w in seg.wrappers} | {seg.name}
    raised = wrappers & PRIVILEGE_WRAPPERS
    if raised:
        scores.add("privilege", 3, f"runs as another user via {', '.join(sorted(raised))}")
    if seg.name == "chmod" and any(_dangerous_mode(a) for a in seg.argv[1:]):
        scores.add("privilege", 2, "`chmod` to setuid/setgid or world-writable")


def _dangerous_mode(mode: str) -> bool:
    """True for a chmod mode that sets setuid/setgid or makes a file world-writable."""
    if re.fullmatch(r"[0-7]{3,4}", mode):
        special = int(mode[0]) if len(mode) == 4 else 0
        return bool(special & 0b110) or int(mode[-1]) & 0b010 != 0
    symbolic = re.fullmatch(r"([ugoa]*)[+=]([rwxXst]*)", mode)
    if symbolic:
        who, perms = symbolic.groups()
        return "s" in perms or ("w" in perms and (who in ("", "a") or "o" in who))
    return False


def _removal(seg: Segment, scores: _Scores) -> None:
    if seg.name not in ("rm", "rmdir", "unlink", "find"):
        return
    flags = "".join(a[1:] for a in seg.argv[1:] if a.startswith("-") and not a.startswith("--"))
    forceful = "r" in flags.lower() or "f" in flags or "--recursive" in seg.argv
    targets = [a for a in seg.argv[1:] if not a.startswith("-")]
    if seg.name == "find" and "-delete" in seg.argv:
        scores.add("irreversibility", 2, "`find -delete`")
    if seg.name == "rm" and forceful:
        scores.add("irreversibility", 2, "`rm` recursive or forced")
    if any(t in _ROOTISH or t.startswith(_SYSTEM_DIRS) for t in targets) and forceful:
        scores.add("irreversibility", 3, "forced removal of a root, home or system folder")
        scores.add("blast_radius", 3, "removal aimed at a root, home or system folder")


#: Commands that write every file they name, and those that write their last one.
_FILE_WRITERS = frozenset({"tee", "touch", "truncate"})
_FILE_COPIERS = frozenset({"cp", "mv", "install", "ln", "rsync"})


def _persistence(seg: Segment, scores: _Scores) -> None:
    """``cp x .git/hooks/post-commit``, ``tee -a .git/config``: code that runs later."""
    named = [a for a in seg.argv[1:] if not a.startswith("-")]
    if seg.name in _FILE_COPIERS:
        named = named[-1:]
    elif seg.name not in _FILE_WRITERS and not (seg.name == "sed" and "-i" in seg.argv):
        return
    for arg in named:
        if _PERSISTENCE.search(arg):
            scores.add("privilege", 2, f"writes {arg}, which runs code later")


def _recursion(seg: Segment, scores: _Scores) -> None:
    recursive = any(a in ("-R", "-r", "--recursive") for a in seg.argv[1:])
    if recursive and seg.name in ("chmod", "chown", "chgrp", "rm", "cp", "mv", "sed"):
        scores.add("blast_radius", 2, f"`{seg.name}` applied recursively")
    if "xargs" in {os.path.basename(w) for w in seg.wrappers} and seg.name in ("rm", "mv", "chmod"):
        scores.add("blast_radius", 2, f"`{seg.name}` applied to a generated list of files")


_UPLOAD_FLAGS = re.compile(
    r"^(-d|--data(-binary|-raw|-urlencode)?|-F|--form|-T|--upload-file|--post-(data|file)"
    r"|--body-data|--body-file|-X|--request)(=.*)?$"
)


def _network(seg: Segment, scores: _Scores, untrusted: bool) -> None:
    if seg.name in FETCHERS:
        uploading = any(_UPLOAD_FLAGS.match(a) for a in seg.argv[1:])
        score = 2 if uploading else 1
        scores.add("network", min(3, score + (1 if untrusted else 0)), f"`{seg.name}` network call")
    elif seg.name in ("ssh", "git", "pip", "pip3", "npm", "pnpm", "yarn", "cargo", "go", "gh"):
        if any(a in ("push", "clone", "fetch", "pull", "install", "add", "get") for a in seg.argv):
            scores.add("network", 1, f"`{seg.name}` reaches the network")
        if seg.name == "ssh":
            scores.add("network", 1, "`ssh` to another host")


def _redirects(seg: Segment, scores: _Scores) -> None:
    for redirect in seg.redirects:
        if not redirect.writes or redirect.target.startswith("/dev/null"):
            continue
        if _PERSISTENCE.search(redirect.target):
            scores.add("privilege", 2, f"writes {redirect.target}, which runs code later")
        if redirect.target.startswith(_SYSTEM_DIRS):
            scores.add("privilege", 3, f"writes into {redirect.target}")
        elif redirect.op in (">", ">|", "&>"):
            scores.add("irreversibility", 1, f"overwrites {redirect.target}")


def risk_outcome(level: RiskLevel, authority: Authority) -> Literal["allow", "ask", "deny"]:
    """What a risk level decides under an authority setting.

    ``advisory``: never changes a decision (the level is only recorded).
    ``escalate-only``: elevated or critical risk asks a person; risk alone never denies.
    ``governing``: elevated asks, critical denies.
    """
    if authority == "advisory" or level in ("trivial", "normal"):
        return "allow"
    if authority == "escalate-only" or level == "elevated":
        return "ask"
    return "deny"
